"""``ConversationalQuery``: a retrieval query that carries the rewrite's plan and receives the fusion decision.

The ``contextual`` rewrite decides which history terms a follow-up needs (a :class:`ContextPlan`); the
:class:`~llama_index_convrag.conversational.retriever.ConversationalRetriever` needs that plan to fuse the
follow-up's own results with the expanded query's, and the turn record needs the fusion decision back. Both travel on
the query object itself, so a rewriter and a retriever shared by many conversations in one process never mix one
turn's plan with another's (two conversations may well produce the same expanded text).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Protocol, Sequence, Tuple

from llama_index.core.schema import QueryBundle


class ContextPlan(Protocol):
    """What the fusing retriever reads of a contextualisation
    (:class:`~llama_index_convrag.conversational.contextualize.Contextualized` satisfies it)."""

    question: str
    query: str
    added: Sequence[object]
    question_weight: float
    context_weight: float

    @property
    def coverage_depth(self) -> int:
        """How many of the question's own results ``weight_given`` reads."""

    def weight_given(self, own_results: Sequence[str]) -> Tuple[float, float]:
        """``(coverage, context weight)`` given the texts of the question's own results, best first."""

    def agreement_factor(self, agreement: float) -> float:
        """The factor on ``weight_given``'s weight for the two lists' agreement beyond chance (0 to 1)."""

    def mentioned_in(self, text: str) -> bool:
        """Whether ``text`` mentions one of the added history terms."""


@dataclass
class ConversationalQuery(QueryBundle):
    """A :class:`QueryBundle` for one turn's retrieval: ``query_str`` is the retrieval query; ``plan`` the
    contextual decision that produced it (``None``: search the query as it is); ``fusion`` is set by a fusing
    retriever to the decision it fused with (weights, coverage, agreement, ``own_top_kept``)."""

    plan: Optional[ContextPlan] = field(default=None, repr=False, compare=False)
    fusion: Optional[Dict[str, Any]] = field(default=None, compare=False)


def plan_of(query_bundle: QueryBundle) -> Optional[ContextPlan]:
    """The plan a query carries (``None`` for a plain :class:`QueryBundle`)."""
    return query_bundle.plan if isinstance(query_bundle, ConversationalQuery) else None


def record_fusion(query_bundle: QueryBundle, decision: Dict[str, Any]) -> None:
    """Hand the fusion decision back on the query (a plain :class:`QueryBundle` has nowhere to keep it)."""
    if isinstance(query_bundle, ConversationalQuery):
        query_bundle.fusion = decision
