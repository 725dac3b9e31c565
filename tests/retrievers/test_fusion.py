import math

import pytest

from llama_index_convrag.retrievers.fusion import minmax, rrf, weighted


def test_rrf_matches_hand_computed_scores():
    dense = [("a", 0.9), ("b", 0.8), ("c", 0.1)]
    sparse = [("c", 12.0), ("a", 3.0)]
    fused = rrf([dense, sparse], k=60)
    expected = {"a": 1 / 61 + 1 / 62, "b": 1 / 62, "c": 1 / 63 + 1 / 61}
    assert [d for d, _ in fused] == ["a", "c", "b"]
    for doc, score in fused:
        assert math.isclose(score, expected[doc])


def test_rrf_ties_keep_first_seen_order_and_rejects_negative_k():
    assert [d for d, _ in rrf([[("x", 1.0)], [("y", 1.0)]], k=0)] == ["x", "y"]
    with pytest.raises(ValueError, match="k must be >= 0, got -1"):
        rrf([], k=-1)


def test_minmax_maps_best_to_one_and_flips_lower_is_better():
    assert minmax([("a", 10.0), ("b", 5.0), ("c", 0.0)]) == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert minmax([("a", 0.1), ("b", 0.3)], higher_is_better=False) == {"a": 1.0, "b": 0.0}
    assert minmax([("a", 2.0), ("b", 2.0)]) == {"a": 1.0, "b": 1.0}
    assert minmax([]) == {}


def test_weighted_normalises_so_unbounded_bm25_does_not_dominate():
    dense = [("d1", 0.80), ("s1", 0.79), ("x", 0.10)]
    bm25 = [("s1", 40.0), ("x", 39.0), ("d1", 1.0)]
    # raw weighting would be dominated by BM25 (s1, x first); normalised equal weights give s1 > d1 > x
    fused = weighted([dense, bm25], [0.5, 0.5])
    assert [d for d, _ in fused] == ["s1", "d1", "x"]
    assert math.isclose(dict(fused)["d1"], 0.5 * 1.0 + 0.5 * 0.0)


def test_weighted_changing_weights_changes_ranking():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.2)]
    bm25 = [("c", 9.0), ("b", 5.0), ("a", 1.0)]
    assert [d for d, _ in weighted([dense, bm25], [1.0, 0.0])] == ["a", "b", "c"]
    assert [d for d, _ in weighted([dense, bm25], [0.0, 1.0])] == ["c", "b", "a"]


def test_weighted_missing_ids_get_zero_and_weight_count_must_match():
    fused = dict(weighted([[("a", 1.0), ("b", 0.0)], [("c", 3.0)]], [0.3, 0.7]))
    assert fused == {"a": 0.3, "b": 0.0, "c": 0.7}
    with pytest.raises(ValueError, match="2 lists, 1 weights"):
        weighted([[], []], [1.0])


def _reference_weighted(lists, weights, ups):
    """The definition, written plainly: per-list min-max (best 1, all-equal 1.0, a repeated id keeps its last
    score), weighted sum over the union, best first, ties in first-seen order."""
    scores, seen = {}, {}
    for ranked, w, up in zip(lists, weights, ups):
        if not ranked:
            continue
        values = [s if up else -s for _, s in ranked]
        lo, hi = min(values), max(values)
        norms = {}
        for (doc, _), v in zip(ranked, values):
            norms[doc] = 1.0 if hi == lo else (v - lo) / (hi - lo)
        for doc, norm in norms.items():
            seen.setdefault(doc, len(seen))
            scores[doc] = scores.get(doc, 0.0) + float(w) * norm
    return sorted(scores.items(), key=lambda kv: (-kv[1], seen[kv[0]]))


def test_weighted_equals_its_definition_on_random_lists_with_ties_and_repeats():
    import random

    rng = random.Random(3)
    for _ in range(2000):
        lists = [[(rng.randint(0, 20), rng.choice([0.5, 1.0, rng.random(), -3 * rng.random()]))
                  for _ in range(rng.randint(0, 25))] for _ in range(rng.randint(1, 3))]
        weights = [rng.choice([0.5, 0.3, 1.0, 0.0]) for _ in lists]
        ups = [rng.random() < 0.7 for _ in lists]
        assert weighted(lists, weights, ups) == _reference_weighted(lists, weights, ups)
