"""BudgetedCoverageSelector: passages that together cover the query and each other under a token budget.

Objective (weighted facility location, monotone submodular for non-negative similarities; Lin & Bilmes,
"A Class of Submodular Functions for Document Summarization", ACL 2011)::

    f(S) = sum_t  w_t * max_{j in S} sim(t, j)  +  relevance_weight * sum_{j in S} rel(q, j)

over targets ``t`` = the query (weight ``query_weight``) and every candidate ``i`` (weight ``rel(q, i) / n``, so
covering relevant passages counts more). Cosines are clipped at 0. The greedy picks ``argmax gain / cost**r``
among passages that still fit; the result is the better of that pass and a uniform-cost pass, which opens with
the best single passage. Cost-benefit greedy with the best-single-item safeguard is a (1 - 1/e)/2
approximation (Khuller, Moss & Naor 1999; Krause & Guestrin 2005); CELF (Leskovec et al., KDD 2007) runs the
full uniform pass instead of the single item, which can only score higher.
Selected nodes keep their incoming order and scores; gains go to the ``"budget"`` trail stage.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import MetadataMode, NodeWithScore

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.postprocessors._vectors import VectorSelector
from llama_index_convrag.rank_trail import add_stage

logger = logging.getLogger(__name__)
STAGE = "budget"


def approx_token_count(text: str) -> int:
    """About four characters per token (no tokenizer download); at least 1."""
    return max(1, math.ceil(len(text) / 4))


class BudgetedSelection(NamedTuple):
    """Greedy outcome: picked item indices in pick order, their marginal gains, f(S), total cost, and which
    pass won (``"cost-scaled"`` or ``"uniform"``)."""

    picks: List[int]
    gains: List[float]
    value: float
    cost: float
    strategy: str


def coverage_value(
    sim: Any, weights: Sequence[float], selected: Sequence[int], modular: Optional[Sequence[float]] = None
) -> float:
    """``sum_t w_t * max_{j in selected} sim[t, j] + sum_{j in selected} modular[j]`` (0 for an empty set)."""
    if not len(selected):
        return 0.0
    m = np.asarray(sim, dtype=np.float64)[:, list(selected)]
    extra = 0.0 if modular is None else float(np.asarray(modular, dtype=np.float64)[list(selected)].sum())
    return float(np.asarray(weights, dtype=np.float64) @ m.max(axis=1)) + extra


def _greedy_pass(
    m: np.ndarray, w: np.ndarray, c: np.ndarray, bonus: np.ndarray, budget: float, exponent: float
) -> Tuple[List[int], List[float], float, float]:
    """One greedy pass picking ``argmax gain / cost**exponent`` among items that still fit."""
    covered = np.zeros(m.shape[0])
    picks: List[int] = []
    gains: List[float] = []
    spent = 0.0
    available = np.ones(m.shape[1], dtype=bool)
    while True:
        fits = available & (spent + c <= budget)
        if not fits.any():
            break
        gain = (np.maximum(m, covered[:, None]) - covered[:, None]).T @ w + bonus
        ratio = np.where(fits, gain / np.power(c, exponent), -np.inf)
        best = int(np.argmax(ratio))
        if gain[best] <= 0:
            break
        picks.append(best)
        gains.append(float(gain[best]))
        spent += float(c[best])
        covered = np.maximum(covered, m[:, best])
        available[best] = False
    return picks, gains, float(w @ covered) + float(bonus[picks].sum()), spent


def greedy_budgeted(
    sim: Any,
    weights: Sequence[float],
    costs: Sequence[float],
    budget: float,
    cost_exponent: float = 1.0,
    modular: Optional[Sequence[float]] = None,
) -> BudgetedSelection:
    """Greedy for ``max f(S) s.t. sum cost <= budget``: the better of the cost-scaled pass and the uniform-cost
    pass, which starts from the best single item (CELF's rule, Leskovec et al. 2007; with ``cost_exponent=1``
    this keeps the (1 - 1/e)/2 guarantee).

    ``sim`` is (targets x items) and non-negative, ``modular`` an optional non-negative per-item reward added
    to f; ties go to the earlier item and to the earlier strategy.
    """
    m = np.asarray(sim, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    c = np.asarray(costs, dtype=np.float64)
    n = m.shape[1]
    bonus = np.zeros(n) if modular is None else np.asarray(modular, dtype=np.float64)
    candidates = [BudgetedSelection(*_greedy_pass(m, w, c, bonus, budget, cost_exponent), "cost-scaled")]
    if cost_exponent > 0:
        # The uniform pass opens with the best single item that fits and only adds to it, so it also serves as
        # the classic best-single-item safeguard.
        candidates.append(BudgetedSelection(*_greedy_pass(m, w, c, bonus, budget, 0.0), "uniform"))
    return max(candidates, key=lambda r: r.value)  # max() keeps the first of equal values


def coverage_problem(q: np.ndarray, docs: np.ndarray, query_weight: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sim, weights, rel) for the objective above from unit query and document vectors."""
    rel = np.clip(docs @ q, 0.0, None)
    sim = np.vstack([rel[None, :], np.clip(docs @ docs.T, 0.0, None)])
    weights = np.concatenate([[query_weight], rel / max(len(rel), 1)])
    return sim, weights, rel


class BudgetedCoverageSelector(VectorSelector):
    """Select nodes maximising query-and-mutual coverage within ``token_budget`` tokens."""

    token_budget: int = Field(description="Most tokens the selected passages may take together.")
    query_weight: float = Field(default=1.0, description="Weight of covering the query itself.")
    cost_exponent: float = Field(default=1.0, description="r in gain / cost**r (0 ignores cost in the ratio).")
    relevance_weight: float = Field(
        default=0.0, description="Weight of a modular sum of query relevances added to the coverage objective."
    )
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
        relevance_weight: float = 0.0,
        token_counter: Optional[Callable[[str], int]] = None,
    ) -> None:
        if not isinstance(token_budget, int) or token_budget < 1:
            raise ConfigurationError(f"token_budget must be an integer >= 1, got {token_budget!r}")
        if not query_weight >= 0:
            raise ConfigurationError(f"query_weight must be >= 0, got {query_weight!r}")
        if not 0 <= cost_exponent <= 1:
            raise ConfigurationError(f"cost_exponent must be in [0, 1], got {cost_exponent!r}")
        if not relevance_weight >= 0:
            raise ConfigurationError(f"relevance_weight must be >= 0, got {relevance_weight!r}")
        super().__init__(
            token_budget=token_budget, embed_model=embed_model, query_weight=query_weight,
            cost_exponent=cost_exponent, relevance_weight=relevance_weight, token_counter=approx_token_count if token_counter is None else token_counter,
        )

    @classmethod
    def class_name(cls) -> str:
        return "BudgetedCoverageSelector"

    def _params(self) -> Dict[str, Any]:
        return {"token_budget": self.token_budget, "query_weight": self.query_weight}

    def _select(self, nodes: List[NodeWithScore], q: np.ndarray, docs: np.ndarray) -> List[NodeWithScore]:
        costs = [max(1, int(self.token_counter(n.node.get_content(metadata_mode=MetadataMode.LLM)))) for n in nodes]
        sim, weights, rel = coverage_problem(q, docs, self.query_weight)
        result = greedy_budgeted(sim, weights, costs, self.token_budget, self.cost_exponent,
                                 modular=self.relevance_weight * rel)
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
        return self._emit_end(nodes, out, value=result.value, cost=result.cost, strategy=result.strategy)
