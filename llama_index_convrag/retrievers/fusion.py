"""Pure rank-fusion functions over per-field ranked lists of ``(id, score)``.

* :func:`rrf` is reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009): ``sum_i 1 / (k + rank_i)``, the
  same formula as Milvus' ``RRFRanker`` (rank is 1-based; an id missing from a list contributes nothing).
* :func:`weighted` is convex combination after per-query min-max normalisation of each field's candidate list
  (Lee, 1997; Bruch et al., TOIS 2023). BM25 scores are unbounded while cosine lives in [-1, 1], so weighting raw
  scores lets one side dominate; normalising each list to [0, 1] for this query makes the weights mean what they
  say. Distances where lower is better (L2) are flipped first. A list whose scores are all equal maps to 1.0; an id
  missing from a list gets 0 from it.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Dict, Hashable, List, Sequence, Tuple
from llama_index_convrag.errors import ConfigurationError

Ranked = Sequence[Tuple[Hashable, float]]


def _order(scores: Dict[Hashable, float]) -> List[Tuple[Hashable, float]]:
    """Best first; ties keep first-seen order (``scores`` is filled in first-seen order and the sort is stable)."""
    return sorted(scores.items(), key=itemgetter(1), reverse=True)


def rrf(lists: Sequence[Ranked], k: float = 60.0) -> List[Tuple[Hashable, float]]:
    """Reciprocal rank fusion; ties keep first-seen order."""
    if k < 0:
        raise ConfigurationError(f"rrf k must be >= 0, got {k!r}")
    scores: Dict[Hashable, float] = {}
    for ranked in lists:
        for rank, (doc, _) in enumerate(ranked, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return _order(scores)


def _normalised(ranked: Ranked, higher_is_better: bool) -> List[float]:
    """The scores of ``ranked`` mapped to [0, 1] (best -> 1; all equal -> 1.0), in list order."""
    values = [s if higher_is_better else -s for _, s in ranked]
    lo, hi = min(values), max(values)
    span = hi - lo
    return [1.0] * len(values) if span == 0 else [(v - lo) / span for v in values]


def minmax(ranked: Ranked, higher_is_better: bool = True) -> Dict[Hashable, float]:
    """Scores mapped to [0, 1] within this list (best -> 1); all-equal lists map to 1.0."""
    if not ranked:
        return {}
    return dict(zip([doc for doc, _ in ranked], _normalised(ranked, higher_is_better)))


def weighted(
    lists: Sequence[Ranked], weights: Sequence[float], higher_is_better: Sequence[bool] = ()
) -> List[Tuple[Hashable, float]]:
    """``sum_i w_i * minmax_i(score)`` over the union of ids; ties keep first-seen order."""
    if len(weights) != len(lists):
        raise ConfigurationError(f"need one weight per list: {len(lists)} lists, {len(weights)} weights")
    directions = list(higher_is_better) if higher_is_better else [True] * len(lists)
    scores: Dict[Hashable, float] = {}
    get = scores.get
    for ranked, w, up in zip(lists, weights, directions):
        weight = float(w)
        for doc, norm in minmax(ranked, up).items():
            scores[doc] = get(doc, 0.0) + weight * norm
    return _order(scores)
