"""Maximal marginal relevance (Carbonell & Goldstein, SIGIR 1998) over stored or computed embeddings.

Each step picks ``argmax_i  lambda * sim(q, i) - (1 - lambda) * max_{j in S} sim(i, j)``. ``lambda_mult=1`` is
pure relevance order, ``0`` pure diversity. Node scores are left as they came; the MMR value at selection is
recorded in the rank trail under the ``"mmr"`` stage.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import NodeWithScore

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.postprocessors._vectors import VectorSelector
from llama_index_convrag.rank_trail import add_stage

STAGE = "mmr"


def mmr_select(
    query_sims: Sequence[float], doc_sims: Any, lambda_mult: float, top_n: Optional[int]
) -> List[Tuple[int, float]]:
    """(index, MMR value) in selection order; ties go to the earlier index."""
    rel = np.asarray(query_sims, dtype=np.float64)
    sims = np.asarray(doc_sims, dtype=np.float64)
    n = len(rel)
    k = n if top_n is None else min(top_n, n)
    chosen: List[Tuple[int, float]] = []
    redundancy = np.full(n, -np.inf)
    available = np.ones(n, dtype=bool)
    for _ in range(k):
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        values = lambda_mult * rel - (1.0 - lambda_mult) * penalty
        values = np.where(available, values, -np.inf)
        best = int(np.argmax(values))  # first maximum: earlier index wins ties
        chosen.append((best, float(values[best])))
        available[best] = False
        redundancy = np.maximum(redundancy, sims[:, best])
    return chosen


class MMRPostprocessor(VectorSelector):
    """Reorder (and cut to ``top_n``) nodes by maximal marginal relevance."""

    lambda_mult: float = Field(default=0.5, description="1 = relevance only, 0 = diversity only.")
    top_n: Optional[int] = Field(default=None, description="Nodes to keep; None keeps all, reordered.")

    def __init__(
        self, *, embed_model: Optional[BaseEmbedding] = None, lambda_mult: float = 0.5, top_n: Optional[int] = None
    ) -> None:
        if not 0.0 <= lambda_mult <= 1.0:
            raise ConfigurationError(f"lambda_mult must be in [0, 1], got {lambda_mult!r}")
        if top_n is not None and top_n < 1:
            raise ConfigurationError(f"top_n must be >= 1 or None (keep all), got {top_n!r}")
        super().__init__(embed_model=embed_model, lambda_mult=lambda_mult, top_n=top_n)

    @classmethod
    def class_name(cls) -> str:
        return "MMRPostprocessor"

    def _params(self) -> Dict[str, Any]:
        return {"lambda_mult": self.lambda_mult, "top_n": self.top_n}

    def _select(self, nodes: List[NodeWithScore], q: np.ndarray, docs: np.ndarray) -> List[NodeWithScore]:
        out = []
        picks = mmr_select(docs @ q, docs @ docs.T, self.lambda_mult, self.top_n)
        for rank, (i, value) in enumerate(picks, start=1):
            nws = NodeWithScore(node=nodes[i].node, score=nodes[i].score)
            add_stage(nws, STAGE, rank, value, lambda_mult=self.lambda_mult, prev_rank=i + 1,
                      prev_score=nodes[i].score)
            out.append(nws)
        return self._emit_end(nodes, out)
