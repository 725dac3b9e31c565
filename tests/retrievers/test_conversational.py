"""ConversationalRetriever: two searches fused with the contextualiser's weights; one search without a plan."""

import asyncio
from types import SimpleNamespace
from typing import Dict, List

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_convrag.chat.contextualize import HistoryTurn, contextualize
from llama_index_convrag.retrievers.conversational import (FUSION_DEPTH, ConversationalRetriever, fuse_lists,
                                                           fuse_ranked, with_depth)
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
OWN = [("generic", 3.0), ("throat-treat", 2.0), ("other", 1.0)]
CTX = [("throat-treat", 9.0), ("throat-what", 5.0), ("generic", 1.0)]


def test_fuse_lists_exact() -> None:
    own = TableRetriever({"q": OWN}).retrieve("q")
    ctx = TableRetriever({"q": CTX}).retrieve("q")
    fused, decision = fuse_lists(own, ctx, PLAN, 3)  # node texts are their ids: none mentions 'throat' or 'cancer'
    # minmax: own generic 1, throat-treat .5, other 0; ctx throat-treat 1, throat-what .5, generic 0; weights 1, 2x2
    assert PLAN.context_weight == 2.0
    assert [(n.node.node_id, n.score) for n in fused] == [("throat-treat", 4.5), ("throat-what", 2.0),
                                                          ("generic", 1.0)]
    assert decision == {"question": 1.0, "context": 4.0, "coverage": 0.0, "own_top_kept": False}


def test_an_on_topic_own_first_result_stays_first() -> None:
    texts = {"generic": "Throat cancer can be treated.", "throat-treat": "Throat treatments.", "other": "x",
             "throat-what": "y"}
    fused, decision = fuse_ranked(OWN, CTX, PLAN, texts.__getitem__)
    weight = 2.0 * (0.25 + 1.75 / 3)  # 2 of the 3 own results mention 'throat'
    assert decision == {"question": 1.0, "context": pytest.approx(weight), "coverage": pytest.approx(2 / 3),
                        "own_top_kept": True}
    # fusion alone ranks throat-treat (.5 + w) over generic (1.0); generic answers the question and is on topic
    assert [d for d, _ in fused] == ["generic", "throat-treat", "throat-what", "other"]
    assert fused[0][1] == fused[1][1] == pytest.approx(0.5 + weight)


def test_two_searches_with_a_plan_one_without() -> None:
    base = TableRetriever({PLAN.question: OWN, PLAN.query: CTX, "plain": OWN})
    retriever = ConversationalRetriever(base, {PLAN.query: PLAN}.get)
    # none of the question's own results mentions 'throat' or 'cancer': the expansion's weight doubles (2 -> 4)
    assert [n.node.node_id for n in retriever.retrieve(PLAN.query)] == ["throat-treat", "throat-what", "generic"]
    assert retriever.fusion_for(PLAN.query) == {"question": 1.0, "context": 4.0, "coverage": 0.0,
                                                "own_top_kept": False}
    assert base.asked == ["Is it treatable?", "Is it treatable? throat cancer"]
    assert [n.node.node_id for n in retriever.retrieve("plain")] == ["generic", "throat-treat", "other"]
    assert base.asked[2:] == ["plain"]
    assert retriever.fusion_for("plain") is None
    fused = asyncio.run(retriever.aretrieve(PLAN.query))
    assert [n.node.node_id for n in fused] == [n.node.node_id for n in retriever.retrieve(PLAN.query)]


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
    retriever = ConversationalRetriever.deepened(base, {PLAN.query: PLAN}.get, depth=3)
    assert (retriever.top_k, retriever.candidates.params.similarity_top_k) == (1, 3)
    assert [n.node.node_id for n in retriever.retrieve(PLAN.query)] == ["throat-treat"]
    assert [n.node.node_id for n in retriever.retrieve(PLAN.question)] == ["generic"]  # no plan: base, one node
    plain = TableRetriever({})
    assert with_depth(plain) == (plain, None) and with_depth(base, depth=1) == (base, None)
    with pytest.raises(ValueError, match="pass top_k= too"):
        ConversationalRetriever(base, {}.get, candidates=base)


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
