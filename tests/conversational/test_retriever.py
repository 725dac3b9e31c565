"""ConversationalRetriever: two searches fused with the contextualiser's weights; one search without a plan."""

import asyncio
from types import SimpleNamespace
from typing import Dict, List

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_convrag.conversational.contextualize import HistoryTurn, contextualize
from llama_index_convrag.conversational.query import ConversationalQuery
from llama_index_convrag.conversational.retriever import (FUSION_DEPTH, ConversationalRetriever, fuse_lists,
                                                           agreement, fuse_ranked, still_wanted,
                                                           with_depth)
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever


class TableRetriever(BaseRetriever):
    """Returns a fixed ranked list per query string and logs the queries it was asked."""

    def __init__(self, table: Dict[str, List[tuple]]) -> None:
        super().__init__()
        self.table = table
        self.asked: List[str] = []

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        self.asked.append(query_bundle.query_str)
        return [NodeWithScore(node=TextNode(id_=i, text=i), score=s) for i, s in self.table[query_bundle.query_str]]


PLAN = contextualize("Is it treatable?", [HistoryTurn("What is throat cancer?")])


def carrying(plan) -> ConversationalQuery:
    """The query a chat turn hands the retriever: the expanded text carrying its plan."""
    return ConversationalQuery(plan.query, plan=plan)
OWN = [("generic", 3.0), ("throat-treat", 2.0), ("other", 1.0)]
CTX = [("throat-treat", 9.0), ("throat-what", 5.0), ("throat-more", 3.0), ("generic", 1.0)]


def test_fuse_lists_exact() -> None:
    own = TableRetriever({"q": OWN}).retrieve("q")
    ctx = TableRetriever({"q": CTX}).retrieve("q")
    fused, decision = fuse_lists(own, ctx, PLAN, 3)  # node texts are their ids: none mentions 'throat' or 'cancer'
    # minmax: own generic 1, throat-treat .5, other 0; ctx throat-treat 1, throat-what .5, throat-more .25, generic 0.
    # Weights 1 and 2 (context) x 2 (coverage 0) x 1 + 4 x (0.4 - 1/6): 2 of 3 shared where chance gives 3 of the 5
    # ids held, agreement (2/3 - 3/5) / (1 - 3/5) = 1/6. 'generic' is 4th of the expanded list: not kept first.
    assert PLAN.context_weight == 2.0
    w = 4 * (1 + 4 * (0.4 - 1 / 6))
    # the sum is divided by the weights' sum (1 + w): scores stay between 0 and 1, as a plain search prints them
    assert [(n.node.node_id, round(n.score, 6)) for n in fused] == [
        ("throat-treat", round((0.5 + w) / (1 + w), 6)), ("throat-what", round(w / 2 / (1 + w), 6)),
        ("throat-more", round(w / 4 / (1 + w), 6))]
    assert decision == {"question": 1.0, "context": pytest.approx(w), "coverage": 0.0,
                        "agreement": pytest.approx(1 / 6), "own_top_kept": False}


def test_an_on_topic_own_first_result_stays_first() -> None:
    texts = {"generic": "Throat cancer can be treated.", "throat-treat": "Throat treatments.", "other": "x",
             "throat-what": "y", "throat-more": "z"}
    fused, decision = fuse_ranked(OWN, CTX, PLAN, texts.__getitem__)
    weight = 2.0 * (0.25 + 1.75 / 3) * (1 + 4 * (0.4 - 1 / 6))  # 2 of the 3 own results mention 'throat'
    assert decision == {"question": 1.0, "context": pytest.approx(weight), "coverage": pytest.approx(2 / 3),
                        "agreement": pytest.approx(1 / 6), "own_top_kept": True}
    # fusion alone ranks throat-treat (.5 + w) over generic (1.0); generic answers the question and is on topic
    assert [d for d, _ in fused] == ["generic", "throat-treat", "throat-what", "throat-more", "other"]
    assert fused[0][1] == fused[1][1] == pytest.approx((0.5 + weight) / (1 + weight))


def test_lists_that_agree_keep_the_own_order_lists_that_differ_lean_on_the_expansion() -> None:
    own = [(f"d{i}", 30.0 - i) for i in range(30)]
    reshuffled = [(f"d{i}", float(i)) for i in range(8)] + [(f"x{i}", -1.0 - i) for i in range(22)]
    # 8 of the own first 10 among the expanded first 10; chance: 10 of the 52 ids held
    assert agreement(own, reshuffled, 10) == pytest.approx((0.8 - 10 / 52) / (1 - 10 / 52))
    fused, decision = fuse_ranked(own, reshuffled, PLAN, lambda d: "unrelated")
    assert decision["context"] == 0.0
    assert [d for d, _ in fused[:10]] == [d for d, _ in own[:10]]  # the expansion would only have reshuffled them
    apart = [("y0", 3.0), ("y1", 2.0), ("d9", 1.0)]
    fused, decision = fuse_ranked(own, apart, PLAN, lambda d: "unrelated")
    # 1 of 10 shared, chance 10 / 32: agreement 0, factor 1 + 4 x 0.4 = 2.6 on 2 (context) x 2 (coverage 0)
    assert (decision["agreement"], decision["context"]) == (0.0, pytest.approx(10.4))
    # min-max: y0 10.4 x 1, y1 10.4 x 0.5, d0 1 (own first), d9 0 (last of both lists)
    assert [(d, round(v, 6)) for d, v in fused[:3]] == [("y0", round(10.4 / 11.4, 6)), ("y1", round(5.2 / 11.4, 6)),
                                                        ("d0", round(1 / 11.4, 6))]
    assert all(0.0 <= v <= 1.0 for _, v in fused)


def test_the_own_first_result_stays_first_when_the_expansion_ranks_it_high_too() -> None:
    own = [(f"d{i}", 30.0 - i) for i in range(30)]
    tail = [(f"y{i}", -float(i)) for i in range(20)]
    # agreement 0 (1 of 10 shared, chance 10/52): the expansion weighs 2 x 2 x 2.6 = 10.4; d0 scores 1 + 10.4 x 69/119
    third = [("x0", 100.0), ("x1", 90.0), ("d0", 50.0)] + tail
    fused, decision = fuse_ranked(own, third, PLAN, lambda d: "unrelated")
    assert decision["own_top_kept"] is True and [d for d, _ in fused[:3]] == ["d0", "x0", "x1"]
    fourth = [("x0", 100.0), ("x1", 90.0), ("x2", 80.0), ("d0", 50.0)] + tail[:19]
    fused, decision = fuse_ranked(own, fourth, PLAN, lambda d: "unrelated")
    assert decision["own_top_kept"] is False and fused[0][0] == "x0"


def test_agreement_is_unknown_where_chance_explains_it() -> None:
    assert agreement([], [("a", 1.0)], 10) is None
    assert agreement([("a", 1.0), ("b", 0.5)], [("b", 1.0), ("a", 0.5)], 10) is None  # the whole corpus, twice
    fused, decision = fuse_ranked([("a", 1.0), ("b", 0.5)], [("b", 1.0), ("a", 0.5)], PLAN, lambda d: "unrelated")
    assert decision["agreement"] is None and decision["context"] == 4.0  # the weight stands: 2 x 2 (coverage 0)
    assert [d for d, _ in fused] == ["b", "a"]
    own = [(f"d{i}", 30.0 - i) for i in range(30)]
    assert agreement(own[:4], own[2:], 10) == pytest.approx((0.5 - 4 / 30) / (1 - 4 / 30))  # of own's first 4


def test_two_searches_with_a_plan_one_without() -> None:
    base = TableRetriever({PLAN.question: OWN, PLAN.query: CTX, "plain": OWN})
    retriever = ConversationalRetriever(base)
    # none of the question's own results mentions 'throat' or 'cancer': the expansion's weight doubles (2 -> 4);
    # agreement 1/6 (test_fuse_lists_exact): 1.93 times that
    query = carrying(PLAN)
    assert [n.node.node_id for n in retriever.retrieve(query)] == ["throat-treat", "throat-what", "throat-more",
                                                                   "generic"]  # as many as the longer list
    assert query.fusion == {"question": 1.0, "context": pytest.approx(4 * (1 + 4 * (0.4 - 1 / 6))),
                                                "coverage": 0.0, "agreement": pytest.approx(1 / 6),
                                                "own_top_kept": False}
    assert base.asked == ["Is it treatable?", "Is it treatable? throat cancer"]
    assert [n.node.node_id for n in retriever.retrieve("plain")] == ["generic", "throat-treat", "other"]
    assert base.asked[2:] == ["plain"]
    plain = ConversationalQuery("plain")
    assert [n.node.node_id for n in retriever.retrieve(plain)] == ["generic", "throat-treat", "other"]
    assert plain.fusion is None  # no plan: one search, nothing fused
    # the expanded text alone (a plain string or QueryBundle) carries no plan: one search of it, as typed
    assert [n.node.node_id for n in retriever.retrieve(PLAN.query)] == [d for d, _ in CTX]
    again = carrying(PLAN)
    fused = asyncio.run(retriever.aretrieve(again))
    assert [n.node.node_id for n in fused] == [n.node.node_id for n in retriever.retrieve(carrying(PLAN))]
    assert again.fusion == query.fusion


class DepthRetriever(TableRetriever):
    """A table retriever with ``params.similarity_top_k`` and ``with_params``, like ``MilvusHybridRetriever``."""

    def __init__(self, table: Dict[str, List[tuple]], top_k: int) -> None:
        super().__init__(table)
        self.params = SimpleNamespace(similarity_top_k=top_k)

    def with_params(self, similarity_top_k: int) -> "DepthRetriever":
        return DepthRetriever(self.table, similarity_top_k)

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return super()._retrieve(query_bundle)[:self.params.similarity_top_k]


def test_fusion_runs_over_deeper_lists_and_cuts_to_top_k() -> None:
    # top-1 lists would tie at 1.0 each and keep the question's own 'generic'; depth 3 lets 'throat-treat' win.
    base = DepthRetriever({PLAN.question: OWN, PLAN.query: CTX}, top_k=1)
    retriever = ConversationalRetriever.deepened(base, depth=3)
    assert (retriever.top_k, retriever.candidates.params.similarity_top_k) == (1, 3)
    assert [n.node.node_id for n in retriever.retrieve(carrying(PLAN))] == ["throat-treat"]
    assert [n.node.node_id for n in retriever.retrieve(PLAN.question)] == ["generic"]  # no plan: base, one node
    plain = TableRetriever({})
    assert with_depth(plain) == (plain, None) and with_depth(base, depth=1) == (base, None)
    with pytest.raises(ValueError, match="pass top_k= too"):
        ConversationalRetriever(base, candidates=base)


def test_the_deeper_copy_skips_dense_feedback_and_keeps_the_rest(milvus_client, embed_model,
                                                                 corpus_collection) -> None:
    def make(**kw):
        return MilvusHybridRetriever.from_defaults(collection_name=corpus_collection, embed_model=embed_model,
                                                   client=milvus_client, **kw)

    base = make(similarity_top_k=5)  # default: weighted hybrid with dense feedback
    assert base.params.feedback is not None
    candidates, top_k = with_depth(base)
    assert top_k == 5 and candidates.params.similarity_top_k == FUSION_DEPTH and candidates.params.feedback is None
    assert (candidates.params.search_type, candidates.params.ranker_type) == ("hybrid", "weighted")
    assert base.params.feedback is not None  # the wrapped retriever itself is unchanged
    rrf = make(similarity_top_k=5, ranker_type="rrf")
    assert rrf.params.feedback is None and with_depth(rrf)[0].params.ranker_type == "rrf"


class PlainCopy(BaseRetriever):
    """The same retriever without ``rank_many``: the wrapper then fuses two ``retrieve`` calls."""

    def __init__(self, inner: BaseRetriever) -> None:
        super().__init__()
        self.inner = inner

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return self.inner.retrieve(query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return await self.inner.aretrieve(query_bundle)


FOLLOW_UPS = [contextualize("What do they eat?", [HistoryTurn("Tell me about cats as house pets")]),
              contextualize("Which one rises?", [HistoryTurn("How is sourdough bread made with yeast?")]),
              contextualize("And the red one?", [HistoryTurn("Which planet orbits the Earth? The Moon")])]


@pytest.mark.parametrize("kw", [{}, {"search_type": "dense"}, {"ranker_type": "rrf"}])
def test_ranked_fusion_equals_two_retrieves_and_fetches_only_the_texts_it_reads(milvus_client, milvus_target,
                                                                              embed_model, corpus_collection, kw):
    """A MilvusHybridRetriever candidate list: both queries searched together (nq = 2), one get of the texts the
    fusion reads; the fused nodes (ids, scores, trails) and the decision equal fusing two retrieve calls."""
    from tests.retrievers.test_milvus_hybrid import CallCounter, view

    counter = CallCounter(milvus_client)
    made = {name: MilvusHybridRetriever.from_defaults(collection_name=corpus_collection, embed_model=embed_model,
                                                      client=client, target=milvus_target, similarity_top_k=2, **kw)
            for name, client in (("counted", counter), ("plain", milvus_client))}
    fast = ConversationalRetriever.deepened(made["counted"], depth=8)
    candidates, top_k = with_depth(made["plain"], 8)
    slow = ConversationalRetriever(made["plain"], top_k=top_k, candidates=PlainCopy(candidates))
    assert fast._ranked is fast.candidates and slow._ranked is None
    for plan in FOLLOW_UPS:
        assert plan.added
        counter.calls.clear()
        fast_query, slow_query = carrying(plan), carrying(plan)
        got = fast.retrieve(fast_query)
        assert view(got) == view(slow.retrieve(slow_query)) and len(got) == 2
        assert fast_query.fusion == slow_query.fusion and fast_query.fusion is not None
        searches = [c for c in counter.calls if c[0] != "get"]
        assert searches == ([("search", 2)] if kw else [("search", 2)] * 2) if kw.get("ranker_type") != "rrf" \
            else [("hybrid_search", 1)] * 2
        assert 1 <= len(counter.calls) - len(searches) <= 2  # the texts read, and fused results outside them
        assert view(asyncio.run(ConversationalRetriever.deepened(made["plain"], depth=8)
                                .aretrieve(carrying(plan)))) == view(got)


class TableRanked(TableRetriever):
    """A table retriever that also ranks without text and logs which keys ``nodes_for`` was asked, per round."""

    rankable = True

    def __init__(self, table: Dict[str, List[tuple]]) -> None:
        super().__init__(table)
        self.fetched: List[List[List[str]]] = []

    def rank_many(self, queries: List[QueryBundle]) -> List[SimpleNamespace]:
        return [SimpleNamespace(kept=list(self.table[q.query_str])) for q in queries]

    async def arank_many(self, queries: List[QueryBundle]) -> List[SimpleNamespace]:
        return self.rank_many(queries)

    def nodes_for(self, wanted) -> List[Dict[str, NodeWithScore]]:
        self.fetched.append([list(keys) for _, keys in wanted])
        return [{k: NodeWithScore(node=TextNode(id_=k, text=k), score=dict(r.kept)[k]) for k in keys}
                for r, keys in wanted]

    async def anodes_for(self, wanted) -> List[Dict[str, NodeWithScore]]:
        return self.nodes_for(wanted)


def heavy_plan() -> SimpleNamespace:
    """PLAN with a fixed expanded-list weight of 50 and no own result on topic."""
    plan = SimpleNamespace(**{**PLAN.__dict__, "context_weight": 50.0, "coverage_depth": 10})
    plan.weight_given = lambda texts: (0.0, 50.0)
    plan.agreement_factor = lambda shared: 1.0
    plan.mentioned_in = lambda text: False
    return plan


def test_a_fused_result_outside_the_first_fetch_is_fetched_in_a_second_round() -> None:
    own = [(f"own{i}", 20.0 - i) for i in range(12)]  # min-max: own_i -> (11 - i) / 11
    # own0 is 4th of the expanded list: not high enough there to stay first on that ground
    table = {PLAN.question: own, PLAN.query: [("c1", 9.0), ("c2", 8.8), ("c4", 8.6), ("own0", 8.0), ("c3", 0.0)]}
    plan = heavy_plan()
    fast = TableRanked(table)
    retriever = ConversationalRetriever(fast, top_k=1, candidates=fast)
    slow = ConversationalRetriever(TableRetriever(table), top_k=1)
    # c1: 50 x 1; own0: 1 + 50 x 8/9 = 45.4. First fetch: own[:10] (their texts set the weight), ctx[:2] not in own.
    assert [(n.node_id, n.score) for n in retriever.retrieve(carrying(plan))] == \
        [(n.node_id, n.score) for n in slow.retrieve(carrying(plan))] == [("c1", 50.0 / 51.0)]
    assert fast.fetched == [[[f"own{i}" for i in range(10)], ["c1", "c2"]]]
    fast.fetched.clear()
    # own10 (own 1/11, expanded 1) beats own11 (0 + 50) and c3: it was not among the texts read, so a second get.
    table[PLAN.query] = [("own10", 9.0), ("own11", 9.0), ("c3", 0.0)]
    assert [(n.node_id, round(n.score, 4)) for n in retriever.retrieve(carrying(plan))] == \
        [(n.node_id, round(n.score, 4)) for n in slow.retrieve(carrying(plan))] == [("own10", round((50 + 1 / 11) / 51, 4))]
    assert fast.fetched == [[[f"own{i}" for i in range(10)], []], [["own10"], []]]
    fast.fetched.clear()
    assert [n.node_id for n in asyncio.run(retriever.aretrieve(carrying(plan)))] == ["own10"] and len(fast.fetched) == 2


def test_still_wanted_takes_the_own_lists_node_when_there() -> None:
    own = SimpleNamespace(kept=[("a", 1.0), ("b", 0.5)])
    have = [{"a": object()}, {"x": object()}]
    assert still_wanted([("a", 3.0), ("b", 2.0), ("x", 1.5), ("y", 1.0)], own, have) == (["b"], ["y"])
