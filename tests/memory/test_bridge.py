"""The vocabulary bridge's pure steps on hand-built vectors, and its word cache with a counting embedding."""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr

from llama_index_convrag.embeddings.word_table import WordTable
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.rules import RecallRules
from llama_index_convrag.memory.bridge import (
    WordVectors,
    batch_words,
    bridge_scores,
    bridged_share,
    pool_words,
    query_words,
    stops_of,
    text_words,
    unit_words,
)

RULES = RecallRules()


def test_unit_words_are_distinct_lowercase_content_words_in_order() -> None:
    assert unit_words("I was in Chicago, then Chicago again! It's 2023; ok, lovely Paris.", RULES, "en") == [
        "chicago", "lovely", "paris"]
    assert unit_words("Seattle and Paris", RULES, "en", exclude=["PARIS"]) == ["seattle"]
    assert unit_words("", RULES, "en") == []


GERMAN = "Ich war gestern mit meinem Hund im Park."


def test_unit_words_leave_out_the_stop_words_of_the_language_given() -> None:
    # "ich", "war", "mit", "meinem" are German stop words and not English ones ("im" is under the length floor)
    assert unit_words(GERMAN, RULES, "de") == ["gestern", "hund", "park"]
    assert unit_words(GERMAN, RULES, "en") == ["ich", "war", "gestern", "mit", "meinem", "hund", "park"]
    assert unit_words("Fui al mercado con mi hermana ayer.", RULES, "es") == ["mercado", "hermana", "ayer"]
    # Chinese: jieba's words, any length, less the Chinese stop words ("我", "和", "了")
    assert unit_words("我昨天和妹妹去了北京。", RULES, "zh") == ["昨天", "妹妹", "去", "北京"]
    assert stops_of("ja") == stops_of("zh") and "the" in stops_of("ko") and stops_of("pl") == frozenset()


def test_batch_and_pool_words_read_the_identified_language() -> None:
    assert batch_words([GERMAN, "Der Hund war müde."], RULES) == ["gestern", "hund", "park", "müde"]
    assert batch_words([], RULES) == []
    assert text_words(GERMAN, RULES) == ["gestern", "hund", "park"]
    # the query's language (German) reads the candidates too
    assert pool_words("Wo war Anna mit ihrem Hund?", {3: GERMAN}, ["Anna"], RULES) == (
        ["hund"], {3: ["gestern", "hund", "park"]})


def test_the_word_length_floor_is_a_rule() -> None:
    text = "An ox ate hay in the sun."
    assert unit_words(text, RecallRules(min_word_chars=2), "en") == ["ox", "ate", "hay", "sun"]
    assert unit_words(text, RULES, "en") == ["ate", "hay", "sun"]
    assert unit_words(text, RecallRules(min_word_chars=4), "en") == []


def test_query_words_leave_out_the_speakers_names_and_their_possessives() -> None:
    assert query_words("Which cities has John been to?", ["John", "Tim"], RULES, "en") == ["cities"]
    assert query_words("What do Melanie's kids like?", ["Melanie", "Caroline"], RULES, "en") == ["kids", "like"]
    assert query_words("What did Mary Ann read?", ["Mary Ann"], RULES, "en") == ["read"]


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


VECTORS = {"cities": unit(1, 0, 0), "pets": unit(0, 1, 0), "seattle": unit(0.8, 0.6, 0),
           "dog": unit(0, 0.6, 0.8), "trip": unit(0, 0, 1)}


def test_bridged_share_counts_the_query_words_some_candidate_word_is_near() -> None:
    q = np.stack([VECTORS["cities"], VECTORS["pets"]])
    assert bridged_share(q, np.stack([VECTORS["seattle"]]), 0.8) == 0.5  # cos 0.8 with cities, 0.6 with pets
    assert bridged_share(q, np.stack([VECTORS["seattle"]]), 0.6) == 1.0
    assert bridged_share(q, np.stack([VECTORS["trip"]]), 0.5) == 0.0
    assert bridged_share(q, np.zeros((0, 3)), 0.5) == 0.0
    assert bridged_share(np.zeros((0, 3)), np.stack([VECTORS["trip"]]), 0.5) == 0.0


def test_bridge_scores_add_boost_times_the_share() -> None:
    scores = {3: 1.0, 7: 0.9, 9: 0.5}
    words = {3: ["trip"], 7: ["seattle", "trip"], 9: ["unknown"]}
    got = bridge_scores(scores, ["cities", "pets"], words, VECTORS,
                        RecallRules(bridge_threshold=0.7, bridge_boost=0.4))
    assert got == {3: {"score": 1.0, "share": 0.0}, 7: {"score": pytest.approx(0.9 + 0.4 * 0.5), "share": 0.5},
                   9: {"score": 0.5, "share": 0.0}}
    # off, or nothing to compare: the scores as given
    off = {p: {"score": s, "share": 0.0} for p, s in scores.items()}
    off_rules = RecallRules(bridge_threshold=0.7, bridge_boost=0.0)
    assert bridge_scores(scores, ["cities"], words, VECTORS, off_rules) == off
    assert bridge_scores(scores, ["nowhere"], words, VECTORS, RecallRules(bridge_threshold=0.7)) == off


def test_bridge_scores_read_at_most_the_first_query_words_of_a_long_query() -> None:
    vectors = {f"w{i}": unit(1, 0, 0) if i == 0 else unit(0, 1, 0) for i in range(100)}
    vectors["x"] = unit(0, 1, 0)
    got = bridge_scores({1: 0.0}, [f"w{i}" for i in range(100)], {1: ["x"]}, vectors,
                        RecallRules(bridge_threshold=0.9, bridge_boost=1.0))
    assert got[1]["share"] == pytest.approx(61 / 62)  # w1..w61 of the first 62 lie near x; w0 does not
    got = bridge_scores({1: 0.0}, [f"w{i}" for i in range(100)], {1: ["x"]}, vectors,
                        RecallRules(bridge_threshold=0.9, bridge_boost=1.0, max_query_words=4))
    assert got[1]["share"] == pytest.approx(3 / 4)


def test_pool_words_is_none_when_off_or_without_content_words() -> None:
    texts = {1: "I was in Seattle", 2: "Nice!"}
    assert pool_words("Which cities has John been to?", texts, ["John"], RULES) == (["cities"],
                                                                                    {1: ["seattle"], 2: ["nice"]})
    assert pool_words("Which cities has John been to?", texts, ["John"], RecallRules(bridge_boost=0.0)) is None
    assert pool_words("What did John do?", texts, ["John"], RULES) is None


class Counting(BaseEmbedding):
    """Fixed 2-d vectors (not unit length) per text; counts the batches and the texts embedded."""

    _batches: List[List[str]] = PrivateAttr(default_factory=list)

    def __init__(self) -> None:
        super().__init__(model_name="counting")

    def _vec(self, text: str) -> List[float]:
        return [float(len(text)), 3.0]

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._vec(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._vec(query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._vec(text)

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        self._batches.append(list(texts))
        return [self._vec(t) for t in texts]

    async def _aget_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self._get_text_embeddings(texts)


def test_word_vectors_embed_only_missing_words_once_unit_length_and_forget_the_oldest() -> None:
    model = Counting()
    cache = WordVectors(model, max_words=3)
    got = cache.lookup(["abcd", "ab", "abcd"])
    assert model._batches == [["abcd", "ab"]]
    np.testing.assert_allclose(got["abcd"], [0.8, 0.6], rtol=1e-6)
    assert set(got) == {"abcd", "ab"}
    cache.lookup(["ab", "x"])
    assert model._batches[-1] == ["x"] and len(cache) == 3
    cache.lookup(["yyy"])  # "abcd" is the least recently used: forgotten
    assert len(cache) == 3
    cache.lookup(["abcd", "ab"])
    assert model._batches[-1] == ["abcd"]
    assert cache.lookup([]) == {} and len(model._batches) == 4


async def test_word_vectors_async_twin_shares_the_cache() -> None:
    model = Counting()
    cache = WordVectors(model)
    got: Dict[str, Any] = await cache.alookup(["abcd"])
    np.testing.assert_allclose(got["abcd"], [0.8, 0.6], rtol=1e-6)
    cache.lookup(["abcd"])
    assert model._batches == [["abcd"]]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_word_vectors_refuse_a_bad_size(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"max_words must be an int >= 1, got"):
        WordVectors(Counting(), max_words=bad)


class FixedTable:
    """A word table source that answers ``table`` (None: not made yet)."""

    def __init__(self, table: Any) -> None:
        self.table, self.asked = table, 0

    def get(self) -> Any:
        self.asked += 1
        return self.table


def test_word_vectors_read_table_words_without_embedding_or_caching_them() -> None:
    model = Counting()
    source = FixedTable(None)
    cache = WordVectors(model, table=source)  # type: ignore[arg-type]
    assert cache.missing([]) == [] and source.asked == 0  # no words: the table is not asked for (nor made)
    assert cache.missing(["abcd", "ab"]) == ["abcd", "ab"] and source.asked == 1  # no table yet: both embedded
    source.table = WordTable([(["abcd"], np.asarray([[0.0, 1.0]], dtype=np.float32))])
    assert cache.missing(["abcd", "ab", "ab"]) == ["ab"] and model._batches == []
    got = cache.lookup(["abcd", "ab"])
    assert model._batches == [["ab"]] and len(cache) == 1  # the table's word is neither embedded nor cached
    np.testing.assert_array_equal(got["abcd"], [0.0, 1.0])
    np.testing.assert_allclose(got["ab"], [0.5547002, 0.8320503], rtol=1e-6)
