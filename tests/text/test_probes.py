"""The probes of text nobody tuned for, each as a user expects it (the rules read text through the text layer)."""

from __future__ import annotations

from llama_index_convrag.chat.fallback import DEFAULT_ECHO_RULES, EchoRules, is_echo
from llama_index_convrag.conversational.contextualize import HistoryTurn, contextualize
from llama_index_convrag.conversational.triggers import needs_rewrite
from llama_index_convrag.synthesizers.answer_rules import AnswerType, answer_type
from llama_index_convrag.synthesizers.grounding import check_grounding, cite_sentences
from llama_index_convrag.text import holds_phrase, identify, sentence_spans, split_sentences, terms


def test_a_relative_that_and_characters_inside_chinese_words_trigger_no_rewrite() -> None:
    assert needs_rewrite("What is the gene that causes cystic fibrosis?") == (False, "self-contained")
    assert needs_rewrite("我们应该如何保护森林中的其他野生动物") == (False, "self-contained")  # 该 of 应该, 其 of 其他
    assert needs_rewrite("全球气候因此变暖的主要原因和影响有哪些方面") == (False, "self-contained")  # 此 of 因此


def test_a_german_follow_up_gets_the_name_as_its_english_twin_does() -> None:
    history = [HistoryTurn("Wer war Albert Einstein?", "Albert Einstein war ein theoretischer Physiker.")]
    german = contextualize("Wie alt ist er?", history)
    english = contextualize("How old was he?", [HistoryTurn("Who was Albert Einstein?",
                                                            "Albert Einstein was a theoretical physicist.")])
    assert "Albert Einstein" in german.query and "Albert Einstein" in english.query
    assert not german.topic_shift


def test_a_short_question_of_names_is_read_by_its_stop_words() -> None:
    assert [identify(q) for q in ("Who was Albert Einstein?", "Wer war Albert Einstein?", "How old was he?",
                                  "Is Paris in France?")] == ["en", "de", "en", "en"]


def test_a_noun_is_no_answer_type_cue_and_every_type_has_one() -> None:
    assert answer_type("What is the revenue model of open source?") is AnswerType.DEFINITION
    assert [answer_type(q) for q in ("How many moons has Mars?", "How do I list hidden files?",
                                     "When was it built?", "Which actor won?", "Where is Ulm?", "Why is it red?",
                                     "北京有多少人口", "故宫在哪里")] == [
        AnswerType.COUNT, AnswerType.HOW_TO, AnswerType.WHEN, AnswerType.WHO, AnswerType.WHERE, AnswerType.OTHER,
        AnswerType.COUNT, AnswerType.WHERE]
    assert answer_type("When the disk is full, what does gzip do?") is AnswerType.DEFINITION


def test_a_negated_claim_is_not_supported_and_gets_no_marker() -> None:
    passages = ["The Eiffel Tower was completed in 1889 for the World's Fair."]
    judged, = check_grounding("The Eiffel Tower was not completed in 1889.", passages)
    assert (judged.supported, judged.reason) == (False, "negation")
    assert cite_sentences("The Eiffel Tower was not completed in 1889.", passages) == \
        "The Eiffel Tower was not completed in 1889."


def test_a_scorer_given_to_the_citer_decides_support() -> None:
    passages = ["Paris is in France.", "Lyon is in France."]
    second = lambda claim, texts: [0.0, 1.0]  # noqa: E731 (a model that always prefers the second passage)
    assert cite_sentences("Paris is in France.", passages) == "Paris is in France [1]."
    assert cite_sentences("Paris is in France.", passages, scorer=second) == "Paris is in France [2]."


def test_a_yes_no_question_restated_is_an_answer_and_a_near_verbatim_restatement_is_not() -> None:
    assert not is_echo("the album Calling All Lovers", "Is calling all lovers an album?")  # a real CANARD answer
    assert is_echo("the album Calling All Lovers", "Is calling all lovers an album?",
                   EchoRules(yes_no=())) is True  # the rule is what keeps it: bench/real_answers_replaced.py
    assert not is_echo("You would stop.", "What do I do about stop signs?", DEFAULT_ECHO_RULES)


def test_sentences_and_cues_of_the_text_layer() -> None:
    assert split_sentences("Dr. Smith went home.") == ["Dr. Smith went home."]
    assert sentence_spans("One.  Two\nthree.") == [(0, 4, "One."), (6, 16, "Two three.")]
    assert holds_phrase("你好吗？", "吗$") and not holds_phrase("这是什么？", "吗$")
    assert holds_phrase("How many cats?", "^how many") and not holds_phrase("So how many?", "^how many")
    assert terms("Müller bought a café in Zürich") == ["müller", "bought", "café", "zürich"]
