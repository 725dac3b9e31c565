"""``ConversationalRetriever``: fuse the follow-up's own results with its contextualised query's results.

The ``contextual`` rewrite strategy (:mod:`llama_index_convrag.chat.contextualize`) appends salient history terms to
a follow-up. Searching only the expanded query drags the old topic over the question's own words; this wrapper
searches both the question as typed and the expanded query with the wrapped retriever and fuses the two lists by
min-max normalised weighted fusion (:func:`~llama_index_convrag.retrievers.fusion.weighted`) with the weights the
contextualiser chose: a follow-up that needs context weighs both lists equally, one that stands alone keeps its own
list on top. Measured in ``bench/conversational_retrieval.py`` (RRF fusion of the same lists measured worse).

The retrieval query arrives as a plain string (the chat engine's ``retrieval_query``); ``plans`` maps it back to the
decision that produced it (:meth:`QuestionRewriter.contextual_plan`). Queries without a plan, or whose plan added
nothing, cost exactly one search.
"""

from __future__ import annotations

import asyncio
from typing import Callable, Dict, List, Optional, Protocol, Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_convrag.retrievers import fusion


class ContextPlan(Protocol):
    """What the wrapper reads of a contextualisation (``chat.contextualize.Contextualized`` satisfies it)."""

    question: str
    query: str
    added: Sequence[object]
    question_weight: float
    context_weight: float


PlanLookup = Callable[[str], Optional[ContextPlan]]


def fuse_lists(question_nodes: List[NodeWithScore], context_nodes: List[NodeWithScore], plan: ContextPlan,
               top_k: int) -> List[NodeWithScore]:
    """Weighted min-max fusion of the two ranked node lists (pure); a node keeps its first-seen object."""
    by_id: Dict[str, NodeWithScore] = {}
    lists = []
    for nodes in (question_nodes, context_nodes):
        ranked = []
        for n in nodes:
            by_id.setdefault(n.node.node_id, n)
            ranked.append((n.node.node_id, float(n.score if n.score is not None else 0.0)))
        lists.append(ranked)
    fused = fusion.weighted(lists, [plan.question_weight, plan.context_weight])
    return [NodeWithScore(node=by_id[node_id].node, score=score) for node_id, score in fused[:top_k]]


class ConversationalRetriever(BaseRetriever):
    """Runs ``retriever`` for the question and its contextualised query and fuses them (see module docstring)."""

    def __init__(self, retriever: BaseRetriever, plans: PlanLookup, *, top_k: Optional[int] = None) -> None:
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k!r}")
        super().__init__(callback_manager=retriever.callback_manager)
        self.retriever = retriever
        self.plans = plans
        self.top_k = top_k

    def _plan(self, query_bundle: QueryBundle) -> Optional[ContextPlan]:
        plan = self.plans(query_bundle.query_str)
        return plan if plan is not None and plan.added and plan.question.strip() else None

    def _limit(self, question_nodes: List[NodeWithScore], context_nodes: List[NodeWithScore]) -> int:
        return self.top_k if self.top_k is not None else max(len(question_nodes), len(context_nodes))

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        plan = self._plan(query_bundle)
        if plan is None:
            return self.retriever.retrieve(query_bundle)
        own = self.retriever.retrieve(QueryBundle(plan.question))
        ctx = self.retriever.retrieve(query_bundle)
        return fuse_lists(own, ctx, plan, self._limit(own, ctx))

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        plan = self._plan(query_bundle)
        if plan is None:
            return await self.retriever.aretrieve(query_bundle)
        own, ctx = await asyncio.gather(self.retriever.aretrieve(QueryBundle(plan.question)),
                                        self.retriever.aretrieve(query_bundle))
        return fuse_lists(own, ctx, plan, self._limit(own, ctx))
