"""How episodic recall ranks earlier messages, as one typed value (:class:`RecallRules`) and pure functions.

A recall searches four lists at once (one hybrid search, client-side normalised weighted fusion): the dense and the
BM25 field of each message's own text, and of its text after the message it answers (:func:`~.units.context_text`).
Then each message inherits part of its neighbours' scores (:func:`spread_scores`): in a conversation the words of a
question are often in the message before its answer ("What did you research?" / "Adoption agencies."), and the
answer in the one after. The best ``k`` outside the recent window are kept (:func:`select`).

Each default below names the measurement that chose it: a grid over the weights and spreads on LoCoMo conversations
0-2 (recall@10 of the evidence utterances, flat between 0.77 and 0.79 for the best dozen settings), confirmed on
conversations 3-4 with ``bench/memory_recall.py`` (docs/results/memory.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

from llama_index_convrag.errors import ConfigurationError


@dataclass(frozen=True)
class RecallRules:
    """Every tunable of episodic recall. Checked once, here."""

    context_before: int = 1
    """Earlier messages of the same session indexed with a message (its context text); 0 indexes own texts only
    (the context lists then repeat them). 1: the context lists lift recall@10 on LoCoMo by about 0.09."""
    context_weight: float = 0.5
    """Share of the fusion given to the context lists (the rest to the own-text lists). 0.5: the own and context
    lists together beat either alone; 0.7 ties on conversations 0-2 and loses on 3-4."""
    dense_weight: float = 0.4
    """Share of each pair given to the dense list (the rest to BM25). 0.4: conversation messages are short and
    their exact words (names, objects) carry the match; 0.5 and 0.6 recalled less."""
    forward_spread: float = 0.5
    """A message gains this share of the fused score of the message before it (the answer after a matching
    question). 0.5: recall@10 about +0.06 over no spreading; 0.3 and 0.7 less."""
    backward_spread: float = 0.5
    """A message gains this share of the fused score of the message after it. 0.5: in each of the five best
    settings on conversations 0-2 (0.1 and 0.3 less)."""
    depth: int = 100
    """Candidates each searched list returns before fusion and spreading."""

    def __post_init__(self) -> None:
        for name in ("context_weight", "dense_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ConfigurationError(f"RecallRules.{name} must be a number in [0, 1], got {value!r}")
        for name in ("forward_spread", "backward_spread"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 2.0:
                raise ConfigurationError(f"RecallRules.{name} must be a number in [0, 2], got {value!r}")
        for name, low in (("context_before", 0), ("depth", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"RecallRules.{name} must be an int >= {low}, got {value!r}")

    def weights(self) -> Tuple[float, float, float, float]:
        """Fusion weights of (own dense, own BM25, context dense, context BM25)."""
        own, ctx, d = 1.0 - self.context_weight, self.context_weight, self.dense_weight
        return own * d, own * (1.0 - d), ctx * d, ctx * (1.0 - d)


Spread = Dict[int, Tuple[float, List[int]]]


def spread_scores(fused: Mapping[int, float], rules: RecallRules, before: Optional[int] = None) -> Spread:
    """Per position (the fused candidates and their neighbours, those ``< before`` when given): the score after
    spreading, and the neighbours it inherited from."""
    out: Spread = {}
    wanted = set(fused)
    if rules.forward_spread > 0:
        wanted |= {p + 1 for p in fused}
    if rules.backward_spread > 0:
        wanted |= {p - 1 for p in fused if p > 0}
    for p in wanted:
        if before is not None and p >= before:
            continue
        score = fused.get(p, 0.0)
        came: List[int] = []
        prev, nxt = fused.get(p - 1, 0.0), fused.get(p + 1, 0.0)
        if rules.forward_spread > 0 and prev > 0:
            score += rules.forward_spread * prev
            came.append(p - 1)
        if rules.backward_spread > 0 and nxt > 0:
            score += rules.backward_spread * nxt
            came.append(p + 1)
        out[p] = (score, came)
    return out


def select(spread: Spread, k: int) -> List[int]:
    """The ``k`` best positions, best first (ties: the later message first, the fresher memory)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigurationError(f"k must be an int >= 1, got {k!r}")
    ranked = sorted(spread.items(), key=lambda item: (-item[1][0], -item[0]))
    return [p for p, (score, _) in ranked[:k] if score > 0]
