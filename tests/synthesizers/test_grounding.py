"""Grounding: which answer sentences no passage supports (term overlap and numbers), and citing an uncited answer."""

import pytest

from llama_index_convrag.synthesizers.grounding import (DEFAULT_GROUNDING_RULES, SentenceSupport, check_grounding,
                                                        cite_sentences, grounding_record)

PASSAGES = [
    "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    "Green tea should steep for two minutes in water at eighty degrees.",
]


def test_a_supported_and_an_unsupported_sentence():
    answer = "The Eiffel Tower was completed in 1889 [1]. Napoleon painted it purple in 1925."
    assert check_grounding(answer, PASSAGES) == [
        SentenceSupport(0, "The Eiffel Tower was completed in 1889 [1].", 0, 1.0, True),
        SentenceSupport(1, "Napoleon painted it purple in 1925.", None, 0.0, False, "overlap"),
    ]


def test_the_right_topic_with_a_wrong_number_is_not_support():
    # eiffel, tower, complet are in passage 1 (3 of 4 terms), 1925 is not
    assert check_grounding("The Eiffel Tower was completed in 1925.", PASSAGES) == [
        SentenceSupport(0, "The Eiffel Tower was completed in 1925.", 0, 0.75, False, "numbers")]


def test_overlap_below_the_share_is_unsupported():
    # terms: eiffel, tower, paint, purple (stemmed, stop words dropped): 2 of 4 in passage 1 -> exactly the share
    assert DEFAULT_GROUNDING_RULES.support_share == 0.5
    assert check_grounding("The Eiffel Tower is painted purple.", PASSAGES)[0].supported is True
    # eiffel, tower, paint, purple, napoleon: 2 of 5
    judged = check_grounding("Napoleon painted the Eiffel Tower purple.", PASSAGES)
    assert (judged[0].source, judged[0].overlap, judged[0].supported) == (0, 0.4, False)


@pytest.mark.parametrize("answer", ["Yes.", "[1]", "The context does not mention the architect.", "我不知道。",
                                    "文中没有提到建筑师。"])
def test_short_sentences_markers_and_refusals_are_not_judged(answer):
    assert check_grounding(answer, PASSAGES) == []


def test_chinese_sentences_are_judged_by_character_bigrams():
    passages = ["埃菲尔铁塔在1889年为世界博览会建成。"]
    assert check_grounding("埃菲尔铁塔于1889年建成。它位于月球上。", passages) == [
        SentenceSupport(0, "埃菲尔铁塔于1889年建成。", 0, 1.0, True),
        SentenceSupport(1, "它位于月球上。", None, 0.0, False, "overlap"),
    ]


def test_grounding_record_lists_the_unsupported_with_their_closest_marker():
    answer = "The Eiffel Tower was completed in 1925 [1]. Green tea steeps for two minutes [2]."
    assert grounding_record(answer, PASSAGES) == {
        "method": "lexical", "support_share": 0.5, "judged": 2,
        "unsupported": [{"sentence": 0, "text": "The Eiffel Tower was completed in 1925 [1].", "best_source": 1,
                         "overlap": 0.75, "reason": "numbers"}],
    }


def test_cite_sentences_cites_each_supported_sentence_with_its_best_passage():
    answer = "The tower was completed in 1889. Tea steeps for two minutes! Napoleon painted it."
    assert cite_sentences(answer, PASSAGES) == (
        "The tower was completed in 1889 [1]. Tea steeps for two minutes [2]! Napoleon painted it.")


def test_cite_sentences_in_chinese_puts_the_marker_before_the_full_stop():
    assert cite_sentences("埃菲尔铁塔于1889年建成。它很高。", ["埃菲尔铁塔在1889年为世界博览会建成。"]) == (
        "埃菲尔铁塔于1889年建成[1]。它很高。")


def test_a_short_answer_is_cited_with_the_first_passage_holding_all_of_it():
    passages = ["Tea is grown in 70 countries.", "The 70 seats of the council.", "Tampa Bay hosted it."]
    assert cite_sentences("70", passages) == "70 [1]"
    assert cite_sentences("Tampa Bay.", passages) == "Tampa Bay [3]."
    assert cite_sentences("71", passages) == "71"  # a number no passage holds
    assert cite_sentences("Boston.", passages) == "Boston."


def test_cite_sentences_keeps_the_answers_layout():
    answer = "In short:\n\n- The tower was completed in 1889.\n- Tea steeps   for two minutes."
    assert cite_sentences(answer, PASSAGES) == (
        "In short:\n\n- The tower was completed in 1889 [1].\n- Tea steeps   for two minutes [2].")


def test_a_sentence_the_model_cited_anyway_is_left_as_written():
    answer = "The tower was completed in 1889 [2]. Tea steeps for two minutes."
    assert cite_sentences(answer, PASSAGES) == "The tower was completed in 1889 [2]. Tea steeps for two minutes [2]."
    assert cite_sentences("[1]", PASSAGES) == "[1]"  # no answer: left for the chat engine to recover


def test_a_negated_claim_is_not_supported_by_a_passage_that_affirms_it() -> None:
    passages = ["The Eiffel Tower was completed in 1889. It stands in Paris."]
    assert check_grounding("The Eiffel Tower was not completed in 1889.", passages) == [
        SentenceSupport(0, "The Eiffel Tower was not completed in 1889.", 0, 1.0, False, "negation")]
    assert check_grounding("The Eiffel Tower was completed in 1889.", passages)[0].supported
    assert check_grounding("埃菲尔铁塔不是1889年建成的。", ["埃菲尔铁塔于1889年建成。"])[0].reason == "negation"


def test_a_model_scorer_replaces_the_term_overlap() -> None:
    def entails(claim, passages):
        return [1.0 if "Paris" in p else 0.0 for p in passages]

    record = grounding_record("The tower is in the French capital city.", ["It stands in Paris.", "Rome."],
                              scorer=entails)
    assert (record["method"], record["judged"], record["unsupported"]) == ("entails", 1, [])
