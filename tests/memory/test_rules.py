"""RecallRules and the pure ranking steps of episodic recall, on hand-built scores."""

from __future__ import annotations

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.rules import RecallRules, best, boost_speaker, named_speaker, select, spread_scores


def test_weights_split_context_and_dense_shares() -> None:
    assert RecallRules(context_weight=0.5, dense_weight=0.4).weights() == pytest.approx((0.2, 0.3, 0.2, 0.3))
    assert RecallRules(context_weight=0.0, dense_weight=1.0).weights() == (1.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("field,value,message", [
    ("context_weight", 1.5, r"RecallRules.context_weight must be a number in \[0, 1\], got 1.5"),
    ("dense_weight", True, r"RecallRules.dense_weight must be a number in \[0, 1\], got True"),
    ("forward_spread", -0.1, r"RecallRules.forward_spread must be a number in \[0, 2\], got -0.1"),
    ("second_spread", 2.1, r"RecallRules.second_spread must be a number in \[0, 2\], got 2.1"),
    ("depth", 0, "RecallRules.depth must be an int >= 1, got 0"),
    ("context_before", 1.0, "RecallRules.context_before must be an int >= 0, got 1.0"),
    ("speaker_boost", 2.5, r"RecallRules.speaker_boost must be a number in \[0, 2\], got 2.5"),
    ("speaker_pool", 0, "RecallRules.speaker_pool must be an int >= 1, got 0"),
    ("bridge_boost", -1, r"RecallRules.bridge_boost must be a number in \[0, 2\], got -1"),
    ("bridge_threshold", 1.2, r"RecallRules.bridge_threshold must be a number in \[0, 1\], got 1.2"),
    ("min_word_chars", 0, "RecallRules.min_word_chars must be an int >= 1, got 0"),
    ("max_query_words", 63, r"RecallRules.max_query_words must be an int in \[1, 62\] \(the bridge's .*, got 63"),
    ("max_query_words", 2.0, r"RecallRules.max_query_words must be an int in \[1, 62\] \(the bridge's .*, got 2.0"),
])
def test_bad_rules_name_the_value(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RecallRules(**{field: value})


def test_an_answer_inherits_from_the_question_before_it() -> None:
    rules = RecallRules(forward_spread=0.5, backward_spread=0.25, second_spread=0.0)  # explicit, not the defaults
    spread = spread_scores({4: 1.0, 9: 0.2}, rules)
    assert spread[5] == (0.5, [4])  # never found itself: half of its question's score
    assert spread[3] == (0.25, [4])
    assert spread[4] == (1.0, [])
    assert spread[9] == (0.2, []) and spread[10] == (pytest.approx(0.1), [9])
    assert select(spread, 3) == [4, 5, 3]


def test_spreading_stays_below_the_window_and_off_is_off() -> None:
    spread = spread_scores({4: 1.0, 5: 0.5}, RecallRules(), before=5)
    assert sorted(spread) == [3, 4]
    off = spread_scores({4: 1.0}, RecallRules(forward_spread=0.0, backward_spread=0.0, second_spread=0.0))
    assert off == {4: (1.0, [])}


def test_a_speakers_next_message_inherits_from_two_before() -> None:
    rules = RecallRules(forward_spread=0.5, backward_spread=0.25, second_spread=0.4)
    spread = spread_scores({4: 1.0, 7: 0.5}, rules)
    assert spread[6] == (pytest.approx(0.4 + 0.125), [7, 4])  # the next after 7, two after 4
    assert spread[9] == (pytest.approx(0.2), [7])
    assert spread[5] == (0.5, [4]) and spread[4] == (1.0, [])
    assert sorted(spread) == [3, 4, 5, 6, 7, 8, 9]
    assert sorted(spread_scores({4: 1.0, 7: 0.5}, rules, before=6)) == [3, 4, 5]


def test_select_breaks_ties_towards_the_later_message_and_drops_zero_scores() -> None:
    spread = {1: (0.5, []), 7: (0.5, []), 3: (0.0, [])}
    assert select(spread, 5) == [7, 1]
    with pytest.raises(ConfigurationError, match="k must be an int >= 1, got 0"):
        select(spread, 0)


def test_the_pool_is_k_times_the_speaker_pool_while_a_step_reads_it() -> None:
    assert RecallRules(speaker_pool=3).pool(10) == 30
    assert RecallRules(speaker_boost=0.0, speaker_pool=3).pool(10) == 30  # the bridge step reads them
    assert RecallRules(speaker_boost=0.0, bridge_boost=0.0, speaker_pool=3).pool(10) == 10


@pytest.mark.parametrize("query,named", [
    ("What did John say about Seattle?", "John"),
    ("what did john's daughter study", "John"),  # any case; a possessive is still the name
    ("Which cities has Johnny been to?", None),  # a longer word is not the name
    ("Which city have both Maria and John visited?", None),  # two named: no step
    ("Where is the museum?", None),
    ("Was hat Zoë über Lissabon gesagt?", "Zoë"),
])
def test_named_speaker_is_the_one_speaker_the_query_names(query: str, named: object) -> None:
    assert named_speaker(query, ["John", "Maria", "Zoë", ""]) == named


def test_the_named_speakers_scores_grow_and_the_others_stay() -> None:
    scores = {1: 1.0, 2: 0.8, 3: 0.5}
    speakers = {1: "Ana", 2: "Rui", 3: "Rui"}
    boosted = boost_speaker(scores, speakers, "Rui", 0.5)
    assert boosted == {1: 1.0, 2: pytest.approx(1.2), 3: pytest.approx(0.75)}
    assert best(boosted, 2) == [2, 1]
    assert boost_speaker(scores, speakers, None, 0.5) == scores
    assert boost_speaker(scores, speakers, "Rui", 0.0) == scores
