"""The follow-up rules of the LLM-free contextualiser on small written dialogues: the subject the last answer named,
the topic switch it announces, items of a list, Chinese; and the rules as an explicit, typed argument."""

import pytest

from llama_index_convrag.conversational.contextualize import DEFAULT_RULES, ContextRules, contextualize
from llama_index_convrag.conversational.contextualize import HistoryTurn as H
from llama_index_convrag.conversational.referents import Referent, item_reference, list_items, pick, refers_to_answer
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError

ON = ContextRules(referent_shift=True)  # the default rules, and the topic switch the answer's subject announces
OFF = ContextRules(answer_subject_weight=0.0, list_item_weight=0.0)
GALILEO = [H("What are the largest moons of Jupiter?", "Io, Europa, Ganymede and Callisto."),
           H("Who discovered them?", "Galileo Galilei discovered them in January 1610.")]


def terms(c):
    return [a.term for a in c.added]


def test_he_resolves_to_the_name_the_last_answer_introduced() -> None:
    c = contextualize("Where was he born?", GALILEO)
    assert c.referent == Referent("answer subject", "Galileo Galilei")
    assert c.query == "Where was he born? largest moons Jupiter discovered Galileo Galilei"  # older terms stay
    weights = {a.term: (round(a.weight, 3), a.reason) for a in c.added}
    # 'Galileo' opens a sentence (a content word, 1.0 x 0.15 from the answer) + the rule's 1.0; 'Galilei' is a name
    assert weights["Galileo"] == (1.15, "answer subject: 'Galileo Galilei' in the last turn")
    assert weights["Galilei"] == (1.725, "answer subject: 'Galileo Galilei' in the last turn")
    assert c.reason == ("needs context (pronoun 'he'); answer subject 'Galileo Galilei'; 1 own content term(s): "
                        "expansion weight 2.00")
    assert c.explain()["referent"] == {"kind": "answer subject", "text": "Galileo Galilei"}
    assert contextualize("Where was he born?", GALILEO, OFF).query == "Where was he born? largest moons Jupiter discovered"


def test_the_switch_is_decided_by_what_the_pronoun_resolves_to() -> None:
    history = [H("What is the Hubble telescope?", "A space telescope launched in 1990."),
               H("Who is it named after?", "Edwin Hubble, an American astronomer.")]
    c = contextualize("Which university did he attend?", history, ON)
    # the referent is new: the older turns are damped (telescope, launched fall below min_weight)
    assert c.query == "Which university did he attend? Edwin Hubble" and c.topic_shift is False
    kept = contextualize("Which university did he attend?", history)  # the default: no switch
    assert terms(kept)[:2] == ["Hubble", "Edwin"] and "telescope" in terms(kept)


def test_the_answer_subject_rule_needs_a_pronoun_and_a_question_that_asked_for_a_name() -> None:
    history = [H("What is throat cancer?", "Throat cancer is treated at the Mayo Clinic and elsewhere.")]
    c = contextualize("Is it treatable?", history, ON)  # 'what is' asks for no name: no answer subject
    assert c.referent is None and c.query == "Is it treatable? throat cancer"
    named = contextualize("Where was Galileo born?", GALILEO, ON)  # no pronoun
    assert named.referent is None
    film = contextualize("And when was it released?", [H("Who directed Inception?", "Christopher Nolan directed it.")])
    assert film.referent is None  # 'it' after 'who': still the film, not the person the answer named


@pytest.mark.parametrize("question, previous, refers", [
    ("Where was he born?", "Who discovered them?", True), ("When was it released?", "Who directed Inception?", False),
    ("When was it founded?", "Which company makes it?", True), ("Is she still alive?", "Which band?", False),
    ("Is it treatable?", "What is throat cancer?", False), ("他是哪个朝代的人", "谁写了红楼梦", True),
    ("它贵吗", "哪个牌子好", True), ("Tell me more about the first one.", "Which phone should I buy?", True)])
def test_a_pronoun_means_the_answer_when_it_fits_what_was_asked(question, previous, refers) -> None:
    assert refers_to_answer(question, previous) is refers


def test_an_item_of_the_previous_answers_list_goes_into_the_query() -> None:
    history = [H("What are the main types of renewable energy?",
                 "The main types are solar power, wind power, hydropower and geothermal energy.")]
    c = contextualize("Tell me more about the second one.", history, ON)
    assert c.referent == Referent("list item", "wind power")
    assert c.query == "Tell me more about the second one. renewable energy wind power"
    assert {(a.term, a.weight) for a in c.added if a.term in ("wind", "power")} == {("wind", 2.15), ("power", 2.15)}
    last = contextualize("How much does the last one cost?", [H("Which phones have the best battery?",
                                                                   "1. Moto G7 Power: 5000 mAh\n2. iPhone 11")], ON)
    assert last.referent == Referent("list item", "iPhone 11") and last.query.endswith("iPhone 11")
    both = contextualize("Are both of them cheap?", [H("Which phone?", "The Pixel 3a or the iPhone 11.")], ON)
    assert both.referent == Referent("list item", "The Pixel 3a / the iPhone 11")
    off = contextualize("Tell me more about the second one.", history, OFF)
    assert off.referent is None and "wind" not in terms(off)


@pytest.mark.parametrize("question, positions", [
    ("Tell me more about the first one.", (0,)), ("What about the second?", (1,)), ("And the last one?", (-1,)),
    ("Why the latter?", (-1,)), ("Is the former cheaper?", (0,)), ("Tell me about number 3", (2,)),
    ("Are both of them good?", (0, 1)), ("Do you like both?", (0, 1)), ("为什么喜欢后者", (-1,)), ("前者呢", (0,)), ("第二个要门票吗", (1,)),
    ("第3个呢", (2,)), ("最后一个在哪", (-1,)), ("两者有什么区别", (0, 1)),
    ("Who was the first president?", None), ("What is the last step of the process", (-1,)),
    ("When did it first happen?", None), ("Both teams played well in the final game", None)])
def test_item_reference(question, positions) -> None:
    assert item_reference(question) == positions


@pytest.mark.parametrize("text, items", [
    ("1. Moto G7 Power: long battery\n2. Galaxy A10e - cheap\n- Pixel 3a", ("Moto G7 Power", "Galaxy A10e", "Pixel 3a")),
    ("Options:\n* tea\n* coffee", ("tea", "coffee")),
    ("The main types are squamous cell carcinoma, adenocarcinoma and sarcoma.", ("carcinoma", "adenocarcinoma",
                                                                                 "sarcoma")),
    ("Python or Rust?", ("Python", "Rust")),
    ("He went home and slept. Then he ate.", ()),  # two-way 'and' only in a text of one sentence
    ("Reviewers like its battery, and the phone is cheap. It is red.", ()),  # clauses, not a list
    ("Fever, cough, sore throat and muscle aches.", ("Fever", "cough", "sore throat", "muscle aches")),
    ("北京有故宫、长城和颐和园。", ("有故宫", "长城", "颐和园")), ("你喜欢猫还是狗", ("猫", "狗")),
    ("Nothing listed here at all", ()),
    ("It ate fish, crabs and eggs. The eras are the Triassic, the Jurassic, the Cretaceous and the Paleogene.",
     ("the Triassic", "the Jurassic", "the Cretaceous", "the Paleogene"))])  # the longest enumeration
def test_list_items(text, items) -> None:
    assert list_items(text) == items


def test_an_item_of_stop_words_adds_nothing() -> None:
    c = contextualize("Tell me about the first one.", [H("Which?", "Another, this and that.")], ON)
    assert c.referent == Referent("list item", "Another") and "Another" not in terms(c)


def test_pick_out_of_range_is_empty() -> None:
    assert pick(("a", "b"), (2,)) == () and pick(("a", "b"), (-1, 0)) == ("b", "a")


def test_chinese_follow_ups() -> None:
    latter = contextualize("为什么更喜欢后者", [H("你喜欢猫还是狗", "都喜欢")], ON)
    assert (latter.query, latter.referent) == ("为什么更喜欢后者 狗", Referent("list item", "狗"))
    second = contextualize("第二个要门票吗", [H("北京有哪些景点", "有故宫、长城和颐和园。")], ON)
    assert second.query == "第二个要门票吗 北京 景点 长城" and not second.topic_shift  # it points at an item
    off = contextualize("第二个要门票吗", [H("北京有哪些景点", "有故宫、长城和颐和园。")], OFF)
    assert "长城" not in off.query and off.referent is None  # without the rule the item is not found (吗: elliptical)
    who = contextualize("他是哪个朝代的人", [H("谁写了红楼梦", "曹雪芹写的")], ON)
    assert who.referent is not None and who.referent.kind == "answer subject" and "曹雪芹" in who.query


def test_the_default_rules_take_the_answer_subject_and_list_items_not_the_switch() -> None:
    assert (DEFAULT_RULES.answer_subject_weight, DEFAULT_RULES.list_item_weight, DEFAULT_RULES.referent_shift) == (
        1.0, 2.0, False)
    c = contextualize("Is it treatable?", [H("What is throat cancer?")], ContextRules(covered_factor=0.5))
    assert c.weight_given(["Throat cancer."]) == (1.0, 2.0 * 0.5) and c.rules.covered_factor == 0.5
    assert c.agreement_factor(0.0) == pytest.approx(2.6)
    slow = contextualize("Is it treatable?", [H("What is throat cancer?")], ContextRules(agreement_slope=1.0))
    assert slow.agreement_factor(0.0) == pytest.approx(1.4)


@pytest.mark.parametrize("field, bad", [("max_terms", -1), ("max_terms", 2.5), ("decay", -0.1), ("decay", "x"),
                                        ("list_item_weight", float("nan")), ("shift_min_terms", True)])
def test_bad_rules_are_refused_naming_the_value(field, bad) -> None:
    with pytest.raises(ConfigurationError, match=rf"{field} must be .* got {bad!r}"):
        ContextRules(**{field: bad})


def test_rules_must_be_context_rules() -> None:
    with pytest.raises(ArgumentTypeError, match="rules must be a ContextRules, got dict"):
        contextualize("Is it?", [H("What?")], {"decay": 0.5})  # type: ignore[arg-type]
