"""The scorer contract: relevance of each text to a query, higher is better.

A scorer only scores; :class:`~llama_index_convrag.postprocessors.model_rerank.ModelRerank` batches, sorts, cuts,
records the rank trail and falls back to the incoming order when a scorer raises.
"""

from __future__ import annotations

import asyncio
import math
from abc import ABC, abstractmethod
from typing import List, Sequence

from llama_index_convrag.errors import ScorerError


class Scorer(ABC):
    """Scores ``texts`` against ``query``: one float per text, in input order, higher is more relevant."""

    @property
    @abstractmethod
    def name(self) -> str:
        """Short label recorded in rank trails and events, e.g. ``"embedding:all-MiniLM-L6-v2"``."""

    @abstractmethod
    def score(self, query: str, texts: Sequence[str]) -> List[float]:
        """One score per text."""

    async def ascore(self, query: str, texts: Sequence[str]) -> List[float]:
        """Async twin; the default runs :meth:`score` in a worker thread."""
        return await asyncio.to_thread(self.score, query, texts)


def check_scores(scores: Sequence[float], expected: int, scorer: str) -> List[float]:
    """Scores as finite floats, exactly ``expected`` of them, or :class:`ScorerError` naming the scorer."""
    if len(scores) != expected:
        raise ScorerError(f"scorer {scorer!r} returned {len(scores)} scores for {expected} texts")
    out = [float(s) for s in scores]
    bad = [i for i, s in enumerate(out) if not math.isfinite(s)]
    if bad:
        raise ScorerError(f"scorer {scorer!r} returned non-finite scores at positions {bad}")
    return out
