"""``ConversationalRetriever``: fuse the follow-up's own results with its contextualised query's results.

The ``contextual`` rewrite strategy (:mod:`llama_index_convrag.conversational.contextualize`) appends salient history terms to
a follow-up. Searching only the expanded query drags the old topic over the question's own words; this wrapper
searches both the question as typed and the expanded query with the wrapped retriever and fuses the two lists by
min-max normalised weighted fusion (:func:`~llama_index_convrag.retrievers.fusion.weighted`). The question's own list
weighs 1; the expanded list's weight is the contextualiser's (from the follow-up's own evidence), scaled by how many
of the question's own top results already mention the added history terms
(:meth:`~llama_index_convrag.conversational.contextualize.Contextualized.weight_given`): results on the conversation's topic
keep them on top, results that drifted give way; then by how much the two lists agree beyond chance
(:meth:`~llama_index_convrag.conversational.contextualize.Contextualized.agreement_factor`: lists sharing most of their first
results would only be reshuffled, so the expansion's weight falls to 0; lists sharing no more than chance raise it).
The question's own first result stays first when the expanded query also ranks it among its first 3 or it mentions
an added term (:func:`fuse_ranked`). The decision is written onto the query for
the turn record (``bench/conversational_retrieval.py`` measures it).

With a candidate retriever that ranks without reading text (:class:`RankedSearch`: ``MilvusHybridRetriever`` without
model reranking), the two searches go to Milvus together (one call per field for both queries) and only the texts
the fusion reads are fetched: the question's own first :attr:`ContextPlan.coverage_depth` results and the fused
``top_k`` (a second fetch only for fused results outside the first one). The result is the same as two
``retrieve`` calls (``tests/conversational/test_retriever.py`` compares them); ``bench/followup_cost.py`` measures
the cost.

The plan arrives on the query itself (:class:`~llama_index_convrag.conversational.query.ConversationalQuery`, made by
the chat engine from the rewrite), and the fusion decision goes back on it: nothing is kept on the retriever, so one
retriever serves any number of conversations at once. Queries without a plan, or whose plan added nothing, cost
exactly one search.

Min-max fusion of two top-5 lists is degenerate (each list's last item maps to 0, a one-item list to 1): the two
searches run on ``candidates``, a copy of the retriever that returns :data:`FUSION_DEPTH` nodes
(:func:`with_depth` makes one for retrievers with ``with_params``, such as ``MilvusHybridRetriever``), and the fused
list is cut to ``top_k``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, Hashable, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_convrag.conversational.query import ContextPlan, plan_of, record_fusion
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.retrievers import fusion


class Ranked(Protocol):
    """What the wrapper reads of one ranking (``retrievers.ranking.Ranking``): the kept ``(key, score)``."""

    kept: List[Tuple[str, float]]


@runtime_checkable
class RankedSearch(Protocol):
    """A retriever that ranks several queries together without reading text, then makes nodes of chosen keys
    (``MilvusHybridRetriever``); ``rankable`` says whether that ranking is its own (no model reranking)."""

    @property
    def rankable(self) -> bool:
        ...

    def rank_many(self, queries: Sequence[QueryBundle]) -> Sequence[Ranked]:
        ...

    async def arank_many(self, queries: Sequence[QueryBundle]) -> Sequence[Ranked]:
        ...

    def nodes_for(self, wanted: Sequence[Tuple[Any, Sequence[str]]]) -> List[Dict[str, NodeWithScore]]:
        ...

    async def anodes_for(self, wanted: Sequence[Tuple[Any, Sequence[str]]]) -> List[Dict[str, NodeWithScore]]:
        ...


FUSION_DEPTH = 50
"""Candidates per search that the two lists are fused over (the bench fuses at the same depth)."""
CONSENSUS_DEPTH = 3
"""The question's own first result stays first when the expanded query ranks it this high (:func:`fuse_ranked`)."""


def with_depth(retriever: BaseRetriever, depth: int = FUSION_DEPTH) -> Tuple[BaseRetriever, Optional[int]]:
    """``(a copy of retriever returning depth nodes, its own top_k)`` for a retriever with ``with_params`` and
    ``params.similarity_top_k`` (``MilvusHybridRetriever``); ``(retriever, None)`` for any other.

    The copy skips the dense feedback round (``feedback=False``) where the retriever has one: the two searches of a
    fused follow-up then cost the Milvus calls of one search with feedback, and fusion scores the same without it
    (``convrag eval conversation`` compares)."""
    params = getattr(retriever, "params", None)
    top_k = getattr(params, "similarity_top_k", None)
    copy = getattr(retriever, "with_params", None)
    if not isinstance(top_k, int) or copy is None or top_k >= depth:
        return retriever, None
    if getattr(params, "feedback", None) is not None:
        return copy(similarity_top_k=depth, feedback=False), top_k
    return copy(similarity_top_k=depth), top_k


def agreement(own: Sequence[Tuple[Hashable, float]], ctx: Sequence[Tuple[Hashable, float]], depth: int
              ) -> Optional[float]:
    """How much the two lists' first ``depth`` results agree beyond chance (pure): with ``s`` the share of ``own``'s
    first ``depth`` ids among ``ctx``'s first ``depth`` and ``e = depth / U`` the share expected by chance from the
    ``U`` distinct ids both lists hold, ``(s - e) / (1 - e)``, at least 0. ``None`` when it cannot be told from
    chance: ``own`` is empty, or both lists together hold no more ids than are compared (a corpus that small comes back
    whole for any query)."""
    first = [d for d, _ in own[:depth]]
    held = len({d for d, _ in own} | {d for d, _ in ctx})
    if not first or held <= len(first):
        return None
    theirs = {d for d, _ in ctx[:depth]}
    share = sum(1 for d in first if d in theirs) / len(first)
    chance = len(first) / held
    return max(0.0, (share - chance) / (1.0 - chance))


def fuse_ranked(own: Sequence[Tuple[Hashable, float]], ctx: Sequence[Tuple[Hashable, float]], plan: ContextPlan,
                text_of: Callable[[Hashable], str]) -> Tuple[List[Tuple[Hashable, float]], Dict[str, Any]]:
    """Fuse the question's own ranked ``(id, score)`` list with the expanded query's (pure).

    The expanded list's weight is read off the own list's first ``plan.coverage_depth`` texts
    (``plan.weight_given``) and scaled by how much the two lists' first ``coverage_depth`` agree beyond chance
    (``plan.agreement_factor`` of :func:`agreement`, unless that is ``None``: lists that agree are only reshuffled,
    lists that differ carry what the history found); then min-max weighted fusion. The own list's first result stays
    first when the expanded query also ranks it among its first :data:`CONSENSUS_DEPTH` (both queries find it; only
    where the agreement is known: in a corpus of a few chunks every list holds it) or it already mentions an added
    history term (it answers the question's words and is on the conversation's topic). The fused scores are divided by
    the sum of the two weights, so they stay on the scale a plain search prints (1.0: the best of both lists, after
    per-query min-max normalisation; the order is that of the weighted sum). Returns the fused list and the decision
    (weights, coverage, agreement, ``own_top_kept``)."""
    coverage, weight = plan.weight_given([text_of(d) for d, _ in own[: plan.coverage_depth]])
    agreed = agreement(own, ctx, plan.coverage_depth)
    if agreed is not None:
        weight *= plan.agreement_factor(agreed)
    total = plan.question_weight + weight
    fused = fusion.weighted([own, ctx], [plan.question_weight / total, weight / total] if total > 0 else [1.0, 0.0])
    both_rank_it = agreed is not None and own[0][0] in {d for d, _ in ctx[:CONSENSUS_DEPTH]}  # known: own not empty
    kept = bool(own and fused and fused[0][0] != own[0][0] and (
        both_rank_it or plan.mentioned_in(text_of(own[0][0]))))
    if kept:
        top = own[0][0]
        fused = [(top, fused[0][1])] + [item for item in fused if item[0] != top]
    return fused, {"question": plan.question_weight, "context": weight, "coverage": coverage, "agreement": agreed,
                   "own_top_kept": kept}


def fuse_lists(question_nodes: List[NodeWithScore], context_nodes: List[NodeWithScore], plan: ContextPlan,
               top_k: int) -> Tuple[List[NodeWithScore], Dict[str, Any]]:
    """:func:`fuse_ranked` over two node lists (pure); a node keeps its first-seen object."""
    by_id: Dict[str, NodeWithScore] = {}
    lists = []
    for nodes in (question_nodes, context_nodes):
        ranked = []
        for n in nodes:
            by_id.setdefault(n.node.node_id, n)
            ranked.append((n.node.node_id, float(n.score if n.score is not None else 0.0)))
        lists.append(ranked)
    fused, decision = fuse_ranked(lists[0], lists[1], plan, lambda node_id: by_id[node_id].node.get_content())
    return [NodeWithScore(node=by_id[node_id].node, score=score) for node_id, score in fused[:top_k]], decision


def first_wanted(plan: ContextPlan, own: Ranked, ctx: Ranked, top_k: int) -> Tuple[List[str], List[str]]:
    """The keys whose nodes a ranked fusion fetches first (pure): the own list's first ``max(coverage_depth, top_k)``
    (the fusion reads their texts) and the expanded list's first ``2 * top_k`` not among the own list's."""
    own_keys = [k for k, _ in own.kept[: max(plan.coverage_depth, top_k)]]
    own_all = {k for k, _ in own.kept}
    return own_keys, [k for k, _ in ctx.kept[: 2 * top_k] if k not in own_all]


def still_wanted(fused: Sequence[Tuple[Hashable, float]], own: Ranked, have: Sequence[Dict[str, NodeWithScore]]
                 ) -> Tuple[List[str], List[str]]:
    """The fused keys not fetched yet, split by the list whose node they take (the own list's when in it; pure)."""
    own_all = {k for k, _ in own.kept}
    missing = [str(k) for k, _ in fused if not any(k in nodes for nodes in have)]
    return [k for k in missing if k in own_all], [k for k in missing if k not in own_all]


def ranked_nodes(fused: Sequence[Tuple[Hashable, float]], own_nodes: Dict[str, NodeWithScore],
                 ctx_nodes: Dict[str, NodeWithScore]) -> List[NodeWithScore]:
    """The fused list as nodes (pure): each key's node from the own list when there, else the expanded list's (as
    :func:`fuse_lists` keeps the first-seen object); a key with no row (deleted since the search) is skipped."""
    out = []
    for key, score in fused:
        found = own_nodes.get(str(key), ctx_nodes.get(str(key)))
        if found is not None:
            out.append(NodeWithScore(node=found.node, score=score))
    return out


class ConversationalRetriever(BaseRetriever):
    """Runs ``retriever`` for the question and its contextualised query and fuses them (see module docstring)."""

    def __init__(self, retriever: BaseRetriever, *, top_k: Optional[int] = None,
                 candidates: Optional[BaseRetriever] = None) -> None:
        if top_k is not None and top_k < 1:
            raise ConfigurationError(f"top_k must be >= 1, got {top_k!r}")
        if candidates is not None and top_k is None:
            raise ConfigurationError("candidates= returns more nodes than the answer takes: pass top_k= too")
        super().__init__(callback_manager=retriever.callback_manager)
        self.retriever = retriever
        self.candidates = candidates if candidates is not None else retriever
        self.top_k = top_k
        ranked = self.candidates if isinstance(self.candidates, RankedSearch) else None
        self._ranked: Optional[RankedSearch] = ranked if ranked is not None and ranked.rankable else None

    def _fuse(self, query_bundle: QueryBundle, plan: ContextPlan, own: List[NodeWithScore],
              ctx: List[NodeWithScore]) -> List[NodeWithScore]:
        fused, decision = fuse_lists(own, ctx, plan, self._limit(own, ctx))
        record_fusion(query_bundle, decision)
        return fused

    def _fuse_ranked(self, query_bundle: QueryBundle, plan: ContextPlan, own: Ranked, ctx: Ranked,
                     first: Sequence[Dict[str, NodeWithScore]]) -> List[Tuple[Hashable, float]]:
        """Fuse two rankings (texts from the own list's nodes fetched first), record the decision, cut to the limit."""
        own_nodes = first[0]

        def text_of(key: Hashable) -> str:
            found = own_nodes.get(str(key))
            return found.node.get_content() if found is not None else ""

        fused, decision = fuse_ranked(own.kept, ctx.kept, plan, text_of)
        record_fusion(query_bundle, decision)
        return fused[: self._limit(own.kept, ctx.kept)]

    @classmethod
    def deepened(cls, retriever: BaseRetriever, depth: int = FUSION_DEPTH) -> "ConversationalRetriever":
        """Fuse over ``depth`` candidates per search where the retriever can be asked for them (:func:`with_depth`)."""
        candidates, top_k = with_depth(retriever, depth)
        return cls(retriever, top_k=top_k, candidates=candidates if top_k is not None else None)

    def _plan(self, query_bundle: QueryBundle) -> Optional[ContextPlan]:
        plan = plan_of(query_bundle)
        return plan if plan is not None and plan.added and plan.question.strip() else None

    def _limit(self, question_nodes: Sequence[Any], context_nodes: Sequence[Any]) -> int:
        return self.top_k if self.top_k is not None else max(len(question_nodes), len(context_nodes))

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        plan = self._plan(query_bundle)
        if plan is None:
            return self.retriever.retrieve(query_bundle)
        if self._ranked is not None:
            return self._retrieve_ranked(self._ranked, query_bundle, plan)
        own = self.candidates.retrieve(QueryBundle(plan.question))
        ctx = self.candidates.retrieve(query_bundle)
        return self._fuse(query_bundle, plan, own, ctx)

    def _retrieve_ranked(self, search: RankedSearch, query_bundle: QueryBundle,
                         plan: ContextPlan) -> List[NodeWithScore]:
        own, ctx = search.rank_many([QueryBundle(plan.question), query_bundle])
        wanted = first_wanted(plan, own, ctx, self._limit(own.kept, ctx.kept))
        first = search.nodes_for(list(zip((own, ctx), wanted)))
        fused = self._fuse_ranked(query_bundle, plan, own, ctx, first)
        more = still_wanted(fused, own, first)
        extra = search.nodes_for(list(zip((own, ctx), more))) if more[0] or more[1] else [{}, {}]
        return ranked_nodes(fused, {**first[0], **extra[0]}, {**first[1], **extra[1]})

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        plan = self._plan(query_bundle)
        if plan is None:
            return await self.retriever.aretrieve(query_bundle)
        if self._ranked is not None:
            return await self._aretrieve_ranked(self._ranked, query_bundle, plan)
        own, ctx = await asyncio.gather(self.candidates.aretrieve(QueryBundle(plan.question)),
                                        self.candidates.aretrieve(query_bundle))
        return self._fuse(query_bundle, plan, own, ctx)

    async def _aretrieve_ranked(self, search: RankedSearch, query_bundle: QueryBundle,
                                plan: ContextPlan) -> List[NodeWithScore]:
        own, ctx = await search.arank_many([QueryBundle(plan.question), query_bundle])
        wanted = first_wanted(plan, own, ctx, self._limit(own.kept, ctx.kept))
        first = await search.anodes_for(list(zip((own, ctx), wanted)))
        fused = self._fuse_ranked(query_bundle, plan, own, ctx, first)
        more = still_wanted(fused, own, first)
        extra = await search.anodes_for(list(zip((own, ctx), more))) if more[0] or more[1] else [{}, {}]
        return ranked_nodes(fused, {**first[0], **extra[0]}, {**first[1], **extra[1]})
