"""The LLM-free contextualiser's decisions on small hand-made dialogues (pronoun, ellipsis, topic shift, Chinese)."""

import pytest
from llama_index.core.base.llms.types import ChatMessage

from llama_index_convrag.conversational.contextualize import ContextRules, DEFAULT_RULES, HistoryTurn as H
from llama_index_convrag.conversational.contextualize import agreement_factor, contextualize, history_turns, mentions
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.conversational.rewrite import QuestionRewriter


def terms(c):
    return [a.term for a in c.added]


def test_pronoun_pulls_the_previous_subject() -> None:
    c = contextualize("Is it treatable?", [H("What is throat cancer?")])
    assert c.query == "Is it treatable? throat cancer"
    assert (c.needs_context, c.topic_shift, c.reason) == (
        True, False, "needs context (pronoun 'it'); 1 own content term(s): expansion weight 2.00")
    assert (c.question_weight, c.context_weight) == (1.0, 2.0)  # one word of its own: lean on the history
    assert c.explain()["added_terms"][1] == {"term": "throat", "weight": 1.0, "turns_back": 1,
                                               "reason": "content word in the question 1 turn(s) back"}


def test_ellipsis_and_proper_nouns_outweigh_common_words() -> None:
    c = contextualize("What about the Louvre?", [H("Which museums should I visit in Paris?")])
    assert c.needs_context and c.reason == "needs context (ellipsis); names its own subject 'Louvre': history as a " \
                                          "light prior"
    assert c.context_weight == 0.3
    assert [(a.term, a.weight, a.reason) for a in c.added] == [
        ("Paris", 1.5, "proper noun in the question 1 turn(s) back"),
        ("museums", 1.0, "content word in the question 1 turn(s) back"),
        ("visit", 1.0, "content word in the question 1 turn(s) back")]


def test_topic_shift_adds_nothing() -> None:
    c = contextualize("How do volcanoes form underwater?", [H("What is throat cancer?"), H("Is it treatable?")])
    assert (c.query, c.added, c.topic_shift) == ("How do volcanoes form underwater?", (), True)
    assert c.reason == "topic shift: self-contained and names a subject new to the conversation"


def test_a_shift_must_name_its_own_subject() -> None:
    history = [H("Tell me about tourism in Nigeria.", "Tourism in Nigeria centers largely on events and festivals.")]
    named = contextualize("When was Tesla founded?", history)  # a name the history never held: a new topic
    assert (named.added, named.topic_shift) == ((), True)
    # two common words, both new: maybe the conversation's own subject ('the sector' = tourism), maybe a new one:
    # expanded, with the history as a light prior (as for a follow-up naming its own subject)
    short = contextualize("How's the sector managed?", history)
    assert (short.topic_shift, short.needs_context, short.context_weight) == (False, False, 0.3)
    assert terms(short) == ["Nigeria", "tourism"] and short.query == "How's the sector managed? tourism Nigeria"
    assert short.reason == "looks self-contained; only words new to the conversation: history as a light prior"
    longer = contextualize("How do volcanoes form underwater?", history)  # 3 new content words: a shift
    assert (longer.added, longer.topic_shift) == ((), True)
    chinese = contextualize("北京天气怎么样", [H("你喜欢周杰伦吗")])  # a Chinese phrase names its subject: no capitals
    assert (chinese.added, chinese.topic_shift) == ((), True)


def test_standalone_follow_up_keeps_its_own_list_on_top() -> None:
    c = contextualize("What causes throat cancer in smokers?", [H("What is throat cancer?"), H("Is it treatable?")])
    assert terms(c) == ["treatable"]
    assert (c.needs_context, c.question_weight, c.context_weight) == (False, 1.0, 0.5)  # 2 / its 4 own terms
    assert c.reason == "looks self-contained; 4 own content term(s): expansion weight 0.50"


def test_a_follow_up_naming_its_own_subject_keeps_history_light() -> None:
    c = contextualize("Did Bench make it into Cooperstown?", [H("Who was the greatest catcher?")])
    assert c.needs_context and c.context_weight == 0.3  # 'it' is idiom here; the named subject decides
    assert c.reason.endswith("names its own subject 'Bench': history as a light prior")


def test_recency_and_restated_subject_damp_the_old_topic() -> None:
    history = [H("What is throat cancer?"), H("Is it treatable?"), H("Tell me about lung cancer.")]
    c = contextualize("What are its symptoms?", history)
    weights = {a.term: a.weight for a in c.added}
    assert weights["lung"] == 1.0 and weights["cancer"] > 1.0
    assert weights.get("throat", 0.0) < 0.25 < weights["lung"]  # before the restatement: damped below min_weight


def test_answer_terms_weigh_less_than_question_terms() -> None:
    c = contextualize("When did they disband?", [H("Frank Zappa"), H("What group disbanded?",
                                                                      "Zappa and the Mothers of Invention")],
                      ContextRules(answer_weight=0.5))
    weights = {a.term: a.weight for a in c.added}
    assert weights["Zappa"] > weights["Mothers"] > 0
    assert "Invention" in terms(c) and c.query.startswith("When did they disband? ")


def test_a_name_the_answer_repeats_is_the_likely_referent() -> None:
    answer = ("We recommend the Moto G7 Power. Motorola built the Moto G7 Power around its battery; the Galaxy A10e "
              "is cheaper. Phone reviewers like the Moto G7 Power's battery, and the phone is cheap.")
    rules = ContextRules(answer_subject_weight=0.0)  # the answer-subject rule off (tests/.../test_followups.py)
    c = contextualize("Tell me more about the first one.", [H("Which phone should I buy?", answer)], rules)
    weights = {a.term: (a.weight, a.reason) for a in c.added}
    # 'Moto' is named three times (the first at a sentence's start: a name, since another mention is one), worth
    # 3 x 1.5 x 0.15; 'battery' and 'cheap' are common words, counted once (0.15, below min_weight) however often
    assert weights["Moto"] == (pytest.approx(0.675), "proper noun in the answer 1 turn(s) back (3 mentions)")
    assert weights["G7"][1] == "acronym in the answer 1 turn(s) back (3 mentions)"
    assert "Galaxy" not in weights and "battery" not in weights and "cheap" not in weights  # named once: 0.225
    assert c.query == "Tell me more about the first one. phone buy Moto G7 Power"
    capped = contextualize("Tell me more about the first one.", [H("Which phone should I buy?", answer)],
                           ContextRules(answer_repeat_cap=1, answer_subject_weight=0.0))
    assert capped.query == "Tell me more about the first one. phone buy"  # the rule off: one mention each
    assert capped.rules.answer_repeat_cap == 1 and c.rules is rules
    subject = contextualize("Tell me more about the first one.", [H("Which phone should I buy?", answer)])
    assert subject.query == "Tell me more about the first one. phone buy Moto G7 Power" and subject.rules is DEFAULT_RULES
    assert subject.reason.split("; ")[1] == "answer subject 'Moto G7 Power'"


@pytest.mark.parametrize("name, bad, kind", [("answer_repeat_cap", 0, "an int >= 1"), ("answer_repeat_cap", 2.5, "an int >= 1"),
                                             ("answer_repeat_cap", True, "an int >= 1"), ("max_terms", "3", "an int >= 1"),
                                             ("shift_min_terms", -1, "an int >= 0"), ("decay", -0.5, "a number >= 0"),
                                             ("context_scale", "2", "a number >= 0"), ("agreement_slope", None, "a number >= 0")])
def test_rules_refuse_a_bad_value_naming_it(name: str, bad: object, kind: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"{name} must be {kind}, got {bad!r}"):
        ContextRules(**{name: bad})


def test_contextualize_takes_rules_as_one_typed_argument() -> None:
    with pytest.raises(TypeError, match="rules must be a ContextRules, got dict"):
        contextualize("Is it treatable?", [H("What is throat cancer?")], {"answer_repeat_cap": 1})  # type: ignore
    with pytest.raises(TypeError):
        contextualize("Is it treatable?", [H("What is throat cancer?")], answer_repeat_cap=1)  # type: ignore
    history = [H("What is throat cancer?"), H("Is it treatable?")]
    shift = contextualize("How do volcanoes form underwater?", history)
    assert shift.topic_shift  # 3 new content words name a subject
    assert not contextualize("How do volcanoes form underwater?", history, ContextRules(shift_min_terms=4)).topic_shift
    light = contextualize("Is it treatable?", [H("What is throat cancer?")], ContextRules(context_scale=1.0))
    assert light.context_weight == 1.0 and light.weight_given(["Colds."]) == (0.0, 2.0)
    steep = ContextRules(agreement_slope=2.0, agreement_pivot=0.5)
    assert contextualize("Is it treatable?", [H("What is throat cancer?")], steep).agreement_factor(0.0) == 2.0


def test_chinese_reference_word() -> None:
    c = contextualize("他最好听的歌是哪首", [H("你喜欢周杰伦吗", "喜欢他的歌")])
    assert terms(c) == ["周杰伦"] and c.query == "他最好听的歌是哪首 周杰伦"
    # jieba's words 最好 and 好听 are content words of the follow-up (before: one run cut at 的 and 是 only)
    assert c.reason == "needs context (reference word '他'); 2 own content term(s): expansion weight 1.00"


def test_no_history() -> None:
    assert contextualize("Is it treatable?", []).reason == "no history"


def test_history_turns_groups_answers() -> None:
    msgs = [ChatMessage(role="user", content="q1"), ChatMessage(role="assistant", content="a1"),
            ChatMessage(role="user", content="q2")]
    assert history_turns(msgs) == [H("q1", "a1"), H("q2", "")]


def test_rewriter_strategy_records_the_plan() -> None:
    rw = QuestionRewriter(strategy="contextual", count_tokens=lambda t: len(t.split()))
    history = [ChatMessage(role="user", content="What is throat cancer?"),
               ChatMessage(role="assistant", content="A cancer of the pharynx.")]
    res = rw.rewrite("Is it treatable?", history)
    assert (res.query, res.strategy, res.used_llm, res.skipped_reason) == (
        "Is it treatable? throat cancer", "contextual", False, None)
    assert res.explanation["added_terms"][1]["term"] == "throat"
    assert res.plan.question == "Is it treatable?" and res.plan.query == res.query
    bundle = res.retrieval_bundle()  # what the engine retrieves with: the query carries its own plan
    assert (bundle.query_str, bundle.plan, bundle.fusion) == (res.query, res.plan, None)
    shift = rw.rewrite("How do volcanoes form underwater?", history)
    assert (shift.query, shift.skipped_reason) == ("How do volcanoes form underwater?",
                                                   "topic shift: self-contained and names a subject new to the conversation")


def test_chinese_ellipsis_keeps_the_asked_attribute_not_the_replaced_subject() -> None:
    c = contextualize("北京呢？", [H("上海的人口有多少", "两千多万")])
    # jieba's words: 上海 joins 人口 (before, the run 上海的人口 was cut at 的 and 有 only, and 上海 ranked lower)
    assert (c.query, c.reason) == ("北京呢？ 上海 人口", "needs context (elliptical ending); names its own subject '北京': "
                                                   "history as a light prior")
    assert c.context_weight == 0.3  # 北京 replaces 上海: its own list stays on top


def test_how_long_asks_a_quantity_and_names_no_topic() -> None:
    c = contextualize("How long does it last?", [H("How long is the flu contagious?")])
    assert c.query == "How long does it last? flu contagious"


def test_the_questions_own_results_set_how_much_the_history_weighs() -> None:
    c = contextualize("Is it treatable?", [H("What is throat cancer?")])
    assert c.weight_given([]) == (0.0, 2.0)
    assert c.weight_given(["Throat cancers are often treated.", "Treatable conditions."]) == (0.5, 2.0 * 1.125)
    assert c.weight_given(["Cancer of the throat.", "Throat cancer."]) == (1.0, 2.0 * 0.25)  # on topic already
    assert c.weight_given(["Colds are treatable."] * 3) == (0.0, 2.0 * 2.0)  # the question alone drifted


@pytest.mark.parametrize("agreed, factor", [(0.0, 2.6), (0.15, 2.0), (0.4, 1.0), (0.5, 0.6), (0.65, 0.0),
                                           (0.9, 0.0), (1.0, 0.0)])
def test_lists_that_agree_leave_the_question_alone_lists_that_differ_lean_on_the_history(agreed: float,
                                                                                        factor: float) -> None:
    c = contextualize("Is it treatable?", [H("What is throat cancer?")])
    assert c.agreement_factor(agreed) == pytest.approx(factor)
    assert agreement_factor(agreed) == pytest.approx(factor)


@pytest.mark.parametrize("agreed", [-0.1, 1.5, float("nan")])
def test_an_agreement_outside_zero_to_one_is_refused_naming_it(agreed: float) -> None:
    with pytest.raises(ConfigurationError, match=rf"agreement must be between 0 and 1, got {agreed!r}"):
        agreement_factor(agreed)


def test_mentions_folds_case_plural_possessive_and_reads_chinese_substrings() -> None:
    assert mentions("The Sharks's season", ["shark"]) and mentions("北京的人口", ["人口"])
    assert not mentions("sharkskin", ["shark"]) and not mentions("", ["人口", "shark"])


TAR = [H("How do I extract files from an archive with tar?", "-x, --extract, --get Extract files from an archive. [1]"),
       H("Which option filters it through gzip?", "-z, --gzip, --gunzip, --ungzip Filter the archive through gzip(1).")]


def test_a_new_subject_that_keeps_a_common_word_is_a_topic_shift() -> None:
    c = contextualize("How do I find files by name?", TAR)  # 'find' and 'name' are new, 'files' is not
    assert (c.query, c.topic_shift, c.added) == ("How do I find files by name?", True, ())
    assert c.reason == "topic shift: self-contained and names a subject new to the conversation"
    every = contextualize("How do I find files by name?", TAR, ContextRules(shift_new_share=1.0))
    assert not every.topic_shift and "tar" in terms(every)  # the old rule: every word new, else the history joins
    follow = contextualize("Which option keeps the old files?", TAR)  # 'option' and 'files' seen: same subject
    assert not follow.topic_shift and "tar" in terms(follow)
    pointing = contextualize("How do I find the files by name?", TAR)  # "the files": the ones just talked about
    assert not pointing.topic_shift and "tar" in terms(pointing)
    last = TAR + [H("Does it keep the owner?", "Yes, unless --no-same-owner is given.")]
    owner = contextualize("How do I find files by owner?", last)  # 'owner' is the last turn's: not a new subject
    assert not owner.topic_shift
    short = contextualize("Great, I love learning shell commands today. How do I find files?", TAR)
    assert not short.topic_shift  # the question itself ('find files') holds under shift_min_terms (3) terms


@pytest.mark.parametrize("bad", [0, 1.5, True, "0.5"])
def test_shift_new_share_outside_zero_to_one_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=rf"shift_new_share must be a number in \(0, 1\], got {bad!r}"):
        ContextRules(shift_new_share=bad)  # type: ignore[arg-type]


#: The extractive answer of the first turn quotes an option that mentions 'name' and 'file' (a widened passage).
QUOTED = [H(TAR[0].question, "-x, --extract Extract files from an archive. --one-top-level Extract all files into "
            "a directory named by the base name of the archive. [1]"), TAR[1]]


def test_new_terms_are_counted_against_every_answer_or_the_last_one() -> None:
    every = contextualize("How do I find files by name?", QUOTED)  # the default: against every answer
    assert not every.topic_shift and "tar" in terms(every)  # 'name' and 'file' an older answer said: 1 of 3 new
    last = ContextRules(shift_answers="last")
    c = contextualize("How do I find files by name?", QUOTED, last)  # 'name' is only in an older answer: new
    assert (c.query, c.topic_shift) == ("How do I find files by name?", True)
    said_last = [QUOTED[0], H(TAR[1].question, "Use --name with the base name of the archive.")]
    assert not contextualize("How do I find files by name?", said_last, last).topic_shift  # the last answer's word


@pytest.mark.parametrize("bad", ["every", None, 1])
def test_shift_answers_outside_its_values_is_refused_naming_them(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=rf"shift_answers must be one of \['last', 'all'\], got {bad!r}"):
        ContextRules(shift_answers=bad)  # type: ignore[arg-type]
