"""BudgetedCoverageSelector: passages that together cover the query and each other under a token budget.

Objective (weighted facility location, monotone submodular for non-negative similarities; Lin & Bilmes,
"A Class of Submodular Functions for Document Summarization", ACL 2011)::

    f(S) = sum_t  w_t * max_{j in S} sim(t, j)

over targets ``t`` = the query (weight ``query_weight``) and every candidate ``i`` (weight ``rel(q, i) / n``, so
covering relevant passages counts more). Cosines are clipped at 0. The greedy picks ``argmax gain / cost**r``
among passages that still fit, then keeps the best single passage instead if that alone scores higher: the
cost-benefit greedy with this safeguard is a (1 - 1/e)/2 approximation (Khuller, Moss & Naor 1999; Leskovec et
al., KDD 2007). Selected nodes keep their incoming order and scores; gains go to the ``"budget"`` trail stage.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import MetadataMode, NodeWithScore

from llama_index_convrag.postprocessors._vectors import VectorSelector
from llama_index_convrag.rank_trail import add_stage

logger = logging.getLogger(__name__)
STAGE = "budget"


def approx_token_count(text: str) -> int:
    """About four characters per token (no tokenizer download); at least 1."""
    return max(1, math.ceil(len(text) / 4))


class BudgetedSelection(NamedTuple):
    """Greedy outcome: picked item indices in pick order, their marginal gains, f(S) and total cost."""

    picks: List[int]
    gains: List[float]
    value: float
    cost: float
    single_item: bool


def coverage_value(sim: Any, weights: Sequence[float], selected: Sequence[int]) -> float:
    """``sum_t w_t * max_{j in selected} sim[t, j]`` (0 for an empty set)."""
    if not len(selected):
        return 0.0
    m = np.asarray(sim, dtype=np.float64)[:, list(selected)]
    return float(np.asarray(weights, dtype=np.float64) @ m.max(axis=1))


def greedy_budgeted(
    sim: Any, weights: Sequence[float], costs: Sequence[float], budget: float, cost_exponent: float = 1.0
) -> BudgetedSelection:
    """Cost-scaled greedy for ``max f(S) s.t. sum cost <= budget`` with the best-single-item safeguard.

    ``sim`` is (targets x items) and non-negative; ties go to the earlier item.
    """
    m = np.asarray(sim, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    c = np.asarray(costs, dtype=np.float64)
    n = m.shape[1]
    covered = np.zeros(m.shape[0])
    picks: List[int] = []
    gains: List[float] = []
    spent = 0.0
    available = np.ones(n, dtype=bool)
    while True:
        fits = available & (spent + c <= budget)
        if not fits.any():
            break
        gain = (np.maximum(m, covered[:, None]) - covered[:, None]).T @ w
        ratio = np.where(fits, gain / np.power(c, cost_exponent), -np.inf)
        best = int(np.argmax(ratio))
        if gain[best] <= 0:
            break
        picks.append(best)
        gains.append(float(gain[best]))
        spent += float(c[best])
        covered = np.maximum(covered, m[:, best])
        available[best] = False
    value = float(w @ covered)
    singles = np.where(c <= budget, w @ m, -np.inf)
    if n and np.isfinite(singles).any():
        best_single = int(np.argmax(singles))
        if singles[best_single] > value:
            v = float(singles[best_single])
            return BudgetedSelection([best_single], [v], v, float(c[best_single]), True)
    return BudgetedSelection(picks, gains, value, spent, False)


def coverage_problem(q: np.ndarray, docs: np.ndarray, query_weight: float) -> tuple:
    """(sim, weights) for the objective above from unit query and document vectors."""
    rel = np.clip(docs @ q, 0.0, None)
    sim = np.vstack([rel[None, :], np.clip(docs @ docs.T, 0.0, None)])
    weights = np.concatenate([[query_weight], rel / max(len(rel), 1)])
    return sim, weights


class BudgetedCoverageSelector(VectorSelector):
    """Select nodes maximising query-and-mutual coverage within ``token_budget`` tokens."""

    token_budget: int = Field(description="Most tokens the selected passages may take together.")
    query_weight: float = Field(default=1.0, description="Weight of covering the query itself.")
    cost_exponent: float = Field(default=1.0, description="r in gain / cost**r (0 ignores cost in the ratio).")
    token_counter: Callable[[str], int] = Field(
        default=approx_token_count, exclude=True, description="Tokens of a passage as the LLM will see it."
    )

    def __init__(
        self,
        token_budget: int,
        *,
        embed_model: Optional[BaseEmbedding] = None,
        query_weight: float = 1.0,
        cost_exponent: float = 1.0,
        token_counter: Optional[Callable[[str], int]] = None,
    ) -> None:
        if not isinstance(token_budget, int) or token_budget < 1:
            raise ValueError(f"token_budget must be an integer >= 1, got {token_budget!r}")
        if not query_weight >= 0:
            raise ValueError(f"query_weight must be >= 0, got {query_weight!r}")
        if not 0 <= cost_exponent <= 1:
            raise ValueError(f"cost_exponent must be in [0, 1], got {cost_exponent!r}")
        super().__init__(
            token_budget=token_budget, embed_model=embed_model, query_weight=query_weight,
            cost_exponent=cost_exponent, token_counter=approx_token_count if token_counter is None else token_counter,
        )

    @classmethod
    def class_name(cls) -> str:
        return "BudgetedCoverageSelector"

    def _params(self) -> Dict[str, Any]:
        return {"token_budget": self.token_budget, "query_weight": self.query_weight}

    def _select(self, nodes: List[NodeWithScore], q: np.ndarray, docs: np.ndarray) -> List[NodeWithScore]:
        costs = [max(1, int(self.token_counter(n.node.get_content(metadata_mode=MetadataMode.LLM)))) for n in nodes]
        sim, weights = coverage_problem(q, docs, self.query_weight)
        result = greedy_budgeted(sim, weights, costs, self.token_budget, self.cost_exponent)
        if not result.picks and min(costs) > self.token_budget:
            logger.warning("no passage fits the token budget of %d (smallest costs %d)", self.token_budget, min(costs))
        elif not result.picks:
            logger.warning("no passage within the budget of %d tokens covers the query (similarities <= 0)",
                           self.token_budget)
        order = sorted(result.picks)
        pick_of = {i: k for k, i in enumerate(result.picks)}
        out = []
        for rank, i in enumerate(order, start=1):
            nws = NodeWithScore(node=nodes[i].node, score=nodes[i].score)
            add_stage(nws, STAGE, rank, result.gains[pick_of[i]], pick=pick_of[i] + 1, cost=costs[i],
                      prev_rank=i + 1, prev_score=nodes[i].score)
            out.append(nws)
        return self._emit_end(nodes, out, value=result.value, cost=result.cost, single_item=result.single_item)
