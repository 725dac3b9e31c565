from typing import Any, List, Optional

import numpy as np
import pytest
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters
from pymilvus import AnnSearchRequest, RRFRanker

from llama_index_convrag.milvus.client import MilvusConnectionError, MilvusTarget
from llama_index_convrag.rank_trail import get_trail
from llama_index_convrag.retrievers import fusion
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever

QUERY = "Which pets hunt mice?"
BM25_PARAMS = {"metric_type": "BM25", "params": {"drop_ratio_search": 0.0}}


class EmbeddingRerank(BaseNodePostprocessor):
    """A real (small) reranker: cosine between the query and each node's text with the local model."""

    _model: Any = PrivateAttr()
    _calls: List[tuple] = PrivateAttr(default_factory=list)

    def __init__(self, model: Any) -> None:
        super().__init__()
        self._model = model

    @classmethod
    def class_name(cls) -> str:
        return "EmbeddingRerank"

    def _postprocess_nodes(self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None) -> List[NodeWithScore]:
        self._calls.append((query_bundle.query_str, [n.node_id for n in nodes]))
        vecs = self._model.embed([query_bundle.query_str] + [n.node.get_content() for n in nodes])
        sims = vecs[1:] @ vecs[0]
        return [NodeWithScore(node=n.node, score=float(s)) for n, s in zip(nodes, sims)]


@pytest.fixture
def make(milvus_client, milvus_target, embed_model, corpus_collection):
    def build(**kw: Any) -> MilvusHybridRetriever:
        return MilvusHybridRetriever.from_defaults(collection_name=corpus_collection, embed_model=embed_model,
                                                   client=milvus_client, target=milvus_target, **kw)
    return build


def ids(nodes: List[NodeWithScore]) -> List[str]:
    return [n.node_id for n in nodes]


def test_dense_equals_raw_pymilvus_and_requests_no_vectors(make, milvus_client, embed_model, corpus_collection):
    nodes = make(search_type="dense", similarity_top_k=5).retrieve(QUERY)
    raw = milvus_client.search(corpus_collection, data=[embed_model.get_query_embedding(QUERY)], anns_field="embedding",
                               limit=5, search_params={"metric_type": "COSINE", "params": {}}, output_fields=["text"])[0]
    assert ids(nodes) == [h["id"] for h in raw]
    assert [round(n.score, 5) for n in nodes] == [round(h["distance"], 5) for h in raw]
    first = nodes[0]
    assert first.node.ref_doc_id == "cats" and first.node.metadata["doc_id"] == "cats"
    assert "embedding" not in first.node.metadata and "sparse_embedding" not in first.node.metadata
    assert first.node.metadata["topic"] == "animals"
    assert get_trail(first) == [{"stage": "dense:embedding", "rank": 1, "score": pytest.approx(first.score)}]
    assert "doc_id" in first.node.excluded_llm_metadata_keys


def test_sparse_sends_raw_text_to_bm25(make, milvus_client, corpus_collection):
    nodes = make(search_type="sparse", similarity_top_k=3).retrieve("product codes XJ-9000")
    raw = milvus_client.search(corpus_collection, data=["product codes XJ-9000"], anns_field="sparse_embedding",
                               limit=3, search_params=BM25_PARAMS)[0]
    assert ids(nodes) == [h["id"] for h in raw] and ids(nodes)[0] == "p14"
    assert get_trail(nodes[0])[0]["stage"] == "sparse:sparse_embedding"


def test_hybrid_rrf_equals_raw_hybrid_search_and_explain_gives_same_ranking(make, milvus_client, embed_model,
                                                                              corpus_collection):
    q = "BM25 keyword search"
    nodes = make(search_type="hybrid", ranker_type="rrf", similarity_top_k=4, ranker_params={"k": 20}).retrieve(q)
    reqs = [AnnSearchRequest(data=[embed_model.get_query_embedding(q)], anns_field="embedding",
                             param={"metric_type": "COSINE", "params": {}}, limit=4),
            AnnSearchRequest(data=[q], anns_field="sparse_embedding", param=BM25_PARAMS, limit=4)]
    raw = milvus_client.hybrid_search(corpus_collection, reqs, RRFRanker(20), limit=4)[0]
    assert ids(nodes) == [h["id"] for h in raw]
    assert [s["stage"] for s in get_trail(nodes[0])] == ["fusion:rrf"]
    explained = make(search_type="hybrid", ranker_type="rrf", similarity_top_k=4, ranker_params={"k": 20},
                     explain=True).retrieve(q)
    assert ids(explained) == ids(nodes)
    assert [round(n.score, 6) for n in explained] == [round(h["distance"], 6) for h in raw]
    stages = [s["stage"] for s in get_trail(explained[0])]
    assert stages[-1] == "fusion:rrf" and set(stages[:-1]) <= {"dense:embedding", "sparse:sparse_embedding"}


def test_weighted_weights_change_the_ranking(make):
    q = "small pets like cats and kittens"
    dense_only = make(search_type="dense", similarity_top_k=5).retrieve(q)
    sparse_only = make(search_type="sparse", similarity_top_k=5).retrieve(q)
    w_dense = make(search_type="hybrid", ranker_type="weighted", ranker_params={"weights": [1.0, 0.0]},
                   similarity_top_k=5).retrieve(q)
    w_sparse = make(search_type="hybrid", ranker_type="weighted", ranker_params={"weights": [0.0, 1.0]},
                    similarity_top_k=5).retrieve(q)
    assert ids(w_dense) == ids(dense_only)
    # BM25 matches only a few passages; the rest come from the dense list with a fused score of 0
    assert ids(w_sparse)[: len(sparse_only)] == ids(sparse_only) and len(sparse_only) < 5
    assert all(n.score == 0.0 for n in w_sparse[len(sparse_only):])
    assert ids(w_dense) != ids(w_sparse)
    assert w_dense[0].score == pytest.approx(1.0)
    trail = get_trail(w_dense[0])
    assert trail[-1]["stage"] == "fusion:weighted" and trail[-1]["rank"] == 1


def test_weighted_default_depth_is_100(make):
    r = make(search_type="hybrid", ranker_type="weighted")
    assert r.params.fusion_depth == 100
    assert make(search_type="hybrid", ranker_type="weighted", fusion_depth=12).params.fusion_depth == 12


def test_model_rerank_gets_pre_topk_candidates_and_query_bundle(make, embed_model):
    reranker = EmbeddingRerank(embed_model)
    r = make(search_type="hybrid", ranker_type="model", similarity_top_k=2,
             ranker_params={"model": reranker, "pre_topk": 6, "pre_ranker_type": "rrf"})
    nodes = r.retrieve(QUERY)
    assert len(reranker._calls) == 1
    query, candidates = reranker._calls[0]
    assert query == QUERY and len(candidates) == 6
    assert len(nodes) == 2 and nodes[0].score >= nodes[1].score
    stages = [s["stage"] for s in get_trail(nodes[0])]
    assert stages[-2:] == ["fusion:rrf", "rerank"]
    expected = embed_model.embed([QUERY] + [n.node.get_content() for n in nodes])
    assert nodes[0].score == pytest.approx(float(expected[1] @ expected[0]), abs=1e-5)


def test_filters_apply_on_metadata(make):
    f = MetadataFilters(filters=[MetadataFilter(key="topic", value="animals"),
                                 MetadataFilter(key="year", value=2004, operator=FilterOperator.GT)])
    nodes = make(similarity_top_k=10, filters=f).retrieve(QUERY)
    assert sorted(ids(nodes)) == ["p03", "p15"]
    hostile = MetadataFilters(filters=[MetadataFilter(key="topic", value='x" or 1==1 or "y')])
    got = make(search_type="hybrid", similarity_top_k=10, filters=hostile).retrieve("quoting rules")
    assert ids(got) == ["p16"]


def test_with_params_overrides_are_validated(make):
    r = make(similarity_top_k=3)
    assert len(r.with_params(similarity_top_k=1).retrieve(QUERY)) == 1
    with pytest.raises(ValueError, match="unknown search field 'nope'"):
        r.with_params(search_fields=["nope"])
    with pytest.raises(TypeError, match=r"unknown retriever argument\(s\) \['top_k'\]"):
        r.with_params(top_k=3)


def test_from_defaults_rejects_unknown_kwargs_naming_accepted(make):
    with pytest.raises(TypeError, match=r"\['topk'\]; accepted: \[.*'similarity_top_k'"):
        make(topk=3)


def test_live_schema_validation_names_fields(make):
    with pytest.raises(ValueError, match=r"unknown search field 'title'; vector fields: \['embedding', 'sparse_embedding'\]"):
        make(search_type="hybrid", search_fields=["embedding", "title"])


@pytest.mark.parametrize("kw", [dict(search_type="dense"), dict(search_type="sparse"),
                                dict(search_type="hybrid", ranker_type="rrf"),
                                dict(search_type="hybrid", ranker_type="rrf", explain=True),
                                dict(search_type="hybrid", ranker_type="weighted")])
async def test_async_matches_sync(make, kw):
    r = make(similarity_top_k=4, **kw)
    sync_nodes = r.retrieve(QUERY)
    async_nodes = await r.aretrieve(QUERY)
    assert ids(async_nodes) == ids(sync_nodes)
    assert [round(n.score, 6) for n in async_nodes] == [round(n.score, 6) for n in sync_nodes]
    assert get_trail(async_nodes[0]) == get_trail(sync_nodes[0])


async def test_async_model_rerank_uses_apostprocess(make, embed_model):
    reranker = EmbeddingRerank(embed_model)
    r = make(search_type="hybrid", ranker_type="model", similarity_top_k=2, ranker_params={"model": reranker})
    nodes = await r.aretrieve(QUERY)
    assert len(nodes) == 2 and len(reranker._calls) == 1 and len(reranker._calls[0][1]) == 10


async def test_async_needs_target(milvus_client, embed_model, corpus_collection):
    r = MilvusHybridRetriever.from_defaults(collection_name=corpus_collection, embed_model=embed_model,
                                            client=milvus_client)
    with pytest.raises(ValueError, match="async retrieval needs target="):
        await r.aretrieve(QUERY)


def test_connection_error_names_uri(tmp_path, embed_model):
    uri = str(tmp_path / "missing" / "x.db")
    with pytest.raises(MilvusConnectionError, match="missing/x.db"):
        MilvusHybridRetriever.from_defaults(collection_name="c", embed_model=embed_model, target=MilvusTarget(uri))


def test_missing_collection_is_named(milvus_client, embed_model):
    with pytest.raises(ValueError, match="collection 'no_such_collection' does not exist"):
        MilvusHybridRetriever.from_defaults(collection_name="no_such_collection", embed_model=embed_model,
                                            client=milvus_client)


def test_two_stage_with_the_package_model_rerank(make):
    from llama_index_convrag.postprocessors import ModelRerank

    r = make(search_type="hybrid", ranker_type="model", similarity_top_k=3,
             ranker_params={"model": ModelRerank.from_defaults(), "pre_topk": 8})
    nodes = r.retrieve("Why does bread dough rise?")
    assert ids(nodes)[0] == "p08"
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
    trail = get_trail(nodes[0])
    assert [s["stage"] for s in trail].count("rerank") == 1
    rerank = trail[-1]
    assert rerank["stage"] == "rerank" and rerank["rank"] == 1 and rerank["score"] == pytest.approx(nodes[0].score)
    assert rerank["prev_rank"] >= 1 and rerank["scorer"]


def test_default_is_weighted_hybrid_over_100_candidates_per_field(make):
    r = make(similarity_top_k=4)
    assert r.params.search_type == "hybrid" and r.params.ranker_type == "weighted"
    assert r.params.fusion_depth == 100 and r.params.ranker_params == {"weights": (0.5, 0.5)}
    explicit = make(search_type="hybrid", ranker_type="weighted", ranker_params={"weights": [0.5, 0.5]},
                    fusion_depth=100, similarity_top_k=4)
    assert ids(r.retrieve(QUERY)) == ids(explicit.retrieve(QUERY))
    assert get_trail(r.retrieve(QUERY)[0])[-1]["stage"] == "fusion:weighted"


def _raw_weighted(lists):
    return [k for k, _ in fusion.weighted(lists, [0.5, 0.5])]


def test_default_feedback_equals_raw_pymilvus_rocchio_then_second_fusion(make, milvus_client, embed_model,
                                                                         corpus_collection):
    """Default hybrid: fuse dense + BM25, move the query towards the stored vectors of the 3 best fused hits,
    search the dense field again and fuse the first dense, BM25 and feedback lists 0.25 / 0.5 / 0.25 (computed
    here with raw pymilvus)."""
    q = "pets that hunt mice"
    qv = np.asarray(embed_model.get_query_embedding(q))
    cos = {"metric_type": "COSINE", "params": {}}
    dense = milvus_client.search(corpus_collection, data=[qv.tolist()], anns_field="embedding", limit=100,
                                 search_params=cos)[0]
    sparse = milvus_client.search(corpus_collection, data=[q], anns_field="sparse_embedding", limit=100,
                                  search_params=BM25_PARAMS)[0]
    sparse_list = [(h["id"], h["distance"]) for h in sparse]
    top3 = _raw_weighted([[(h["id"], h["distance"]) for h in dense], sparse_list])[:3]
    stored = {r["id"]: np.asarray(r["embedding"]) for r in milvus_client.get(corpus_collection, ids=top3,
                                                                             output_fields=["embedding"])}
    moved = qv + 0.5 * np.mean([stored[i] for i in top3], axis=0)
    moved *= np.linalg.norm(qv) / np.linalg.norm(moved)
    dense2 = milvus_client.search(corpus_collection, data=[moved.tolist()], anns_field="embedding", limit=100,
                                  search_params=cos)[0]
    lists = [[(h["id"], h["distance"]) for h in dense], sparse_list, [(h["id"], h["distance"]) for h in dense2]]
    expected = [k for k, _ in fusion.weighted(lists, [0.25, 0.5, 0.25])][:6]

    r = make(similarity_top_k=6)
    nodes = r.retrieve(q)
    assert r.params.feedback is not None and (r.params.feedback.docs, r.params.feedback.weight) == (3, 0.5)
    assert ids(nodes) == expected
    stages = {s["stage"] for n in nodes for s in get_trail(n)}
    assert {"feedback:embedding", "dense:embedding", "sparse:sparse_embedding", "fusion:weighted"} <= stages
    single = make(similarity_top_k=6, feedback=False).retrieve(q)
    assert ids(single) == _raw_weighted([[(h["id"], h["distance"]) for h in dense], sparse_list])[:6]
    assert "feedback:embedding" not in {s["stage"] for n in single for s in get_trail(n)}
    assert ids(single) != ids(nodes)  # p14, p04 -> p07, p13 at ranks 5-6 on this corpus


async def test_async_feedback_matches_sync(make):
    r = make(similarity_top_k=6, feedback={"docs": 2, "weight": 1.0})
    sync_nodes, async_nodes = r.retrieve(QUERY), await r.aretrieve(QUERY)
    assert ids(async_nodes) == ids(sync_nodes)
    assert [round(n.score, 6) for n in async_nodes] == [round(n.score, 6) for n in sync_nodes]
    assert get_trail(async_nodes[0]) == get_trail(sync_nodes[0])


def test_unobserved_retrieve_equals_the_instrumented_path(make):
    """With a span handler attached, core's retrieve (span, events) runs and returns the same nodes."""
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    from llama_index.core.base import base_retriever as core_retriever

    from llama_index_convrag.instrumentation import observed

    class Collect(BaseEventHandler):
        events: list = []

        def handle(self, event, **kwargs) -> None:
            self.events.append(type(event).__name__)

    r = make(similarity_top_k=4)
    assert not observed(core_retriever.dispatcher, r.callback_manager)
    quiet = r.retrieve(QUERY)
    root = get_dispatcher()
    handler = Collect()
    root.add_event_handler(handler)
    try:
        assert observed(core_retriever.dispatcher, r.callback_manager)
        loud = r.retrieve(QUERY)
    finally:
        root.event_handlers.remove(handler)
    assert ids(loud) == ids(quiet) and [n.score for n in loud] == [n.score for n in quiet]
    assert handler.events[:1] == ["RetrievalStartEvent"] and "RetrievalEndEvent" in handler.events
    assert not observed(core_retriever.dispatcher, r.callback_manager)


@pytest.mark.parametrize("ranker", [{"ranker_type": "weighted"}, {"ranker_type": "rrf", "explain": True}])
def test_lean_fusion_fetches_the_same_nodes_as_searching_with_fields(make, ranker):
    """Fusing 16 candidates per field down to 4, the searches return ids and scores only and one get fetches the
    kept rows; the nodes (text, metadata, document, score, trail) equal those of a search that returns every field
    (16 kept, first 4), sync and async."""
    import asyncio

    lean = make(search_type="hybrid", fusion_depth=16, similarity_top_k=4, **ranker)
    full = make(search_type="hybrid", fusion_depth=16, similarity_top_k=16, **ranker)
    assert lean._lean(lean._plan()[0]) and not full._lean(full._plan()[0])

    def view(nodes: List[NodeWithScore]) -> list:
        return [(n.node_id, n.node.text, n.node.metadata, n.node.ref_doc_id, n.score, get_trail(n)) for n in nodes]

    expected = view(full.retrieve(QUERY)[:4])
    assert len(expected) == 4 and view(lean.retrieve(QUERY)) == expected
    assert view(asyncio.run(lean.aretrieve(QUERY))) == expected


class CallCounter:
    """The real Milvus Lite client, logging each call's name and how many queries it carried (``nq``)."""

    def __init__(self, client: Any) -> None:
        self.client, self.calls, self.outputs = client, [], []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)
        if name not in ("search", "hybrid_search", "get"):
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            if name == "get":
                self.calls.append(("get", len(kwargs["ids"])))
            elif name == "search":
                self.calls.append(("search", len(kwargs["data"])))
                self.outputs.append(kwargs["output_fields"])
            else:
                self.calls.append(("hybrid_search", len(args[1][0].data)))
            return method(*args, **kwargs)
        return counted


QUERIES = [QUERY, "How does yeast make bread rise?", "vector database with BM25", "red planet dust"]
MODES = [dict(search_type="dense"), dict(search_type="sparse"), dict(search_type="hybrid", ranker_type="rrf"),
         dict(search_type="hybrid", ranker_type="rrf", explain=True), dict(search_type="hybrid"),
         dict(search_type="hybrid", feedback=False), dict(search_type="hybrid", fusion_depth=16)]
CALLS = [[("search", 4)], [("search", 4)], [("hybrid_search", 1)] * 4, [("search", 4)] * 2,  # ("get", rows)
         [("search", 4), ("search", 4), ("get", "feedback"), ("search", 4), ("get", "kept")],
         [("search", 4), ("search", 4), ("get", "kept")],
         [("search", 4), ("search", 4), ("get", "feedback"), ("search", 4), ("get", "kept")]]


def view(nodes: List[NodeWithScore]) -> list:
    return [(n.node_id, n.node.text, n.node.metadata, n.node.ref_doc_id, round(n.score, 6), get_trail(n))
            for n in nodes]


@pytest.mark.parametrize("kw, calls", list(zip(MODES, CALLS)))
def test_retrieve_many_equals_one_retrieve_per_query_in_one_call_per_field(make, milvus_client, embed_model,
                                                                          corpus_collection, kw, calls):
    """Four queries searched together: the nodes (text, metadata, score, trail) of one retrieve each, sync and
    async, with one Milvus call per field, feedback round and fetch for all four (nq = 4)."""
    import asyncio

    expected = [view(make(similarity_top_k=4, **kw).retrieve(q)) for q in QUERIES]
    counter = CallCounter(milvus_client)
    r = MilvusHybridRetriever.from_defaults(collection_name=corpus_collection, embed_model=embed_model,
                                            client=counter, similarity_top_k=4, **kw)
    assert [view(found) for found in r.retrieve_many(QUERIES)] == expected
    feedback_rows = [n for name, n in counter.calls[:3] if name == "get"]  # 3 best fused hits per query, distinct
    rows = {"kept": len({n[0] for found in expected for n in found}), "feedback": (feedback_rows or [None])[0]}
    assert counter.calls == [(name, rows.get(n, n)) for name, n in calls]
    assert all(4 <= n <= 12 for n in feedback_rows)
    assert [view(found) for found in asyncio.run(make(similarity_top_k=4, **kw).aretrieve_many(QUERIES))] == expected


def test_retrieve_many_model_rerank_reranks_each_query(make, embed_model):
    reranker = EmbeddingRerank(embed_model)
    r = make(search_type="hybrid", ranker_type="model", similarity_top_k=2, ranker_params={"model": reranker})
    many = r.retrieve_many(QUERIES[:2])
    assert [q for q, _ in reranker._calls] == QUERIES[:2]
    assert [view(found) for found in many] == [view(r.retrieve(q)) for q in QUERIES[:2]]
    assert not r.rankable and make().rankable


def test_retrieve_many_when_observed_is_one_retrieve_per_query(make):
    from llama_index.core.instrumentation import get_dispatcher

    from tests.fakes import EventCollector

    r = make(similarity_top_k=3)
    quiet = r.retrieve_many(QUERIES[:2])
    handler = EventCollector()
    get_dispatcher().add_event_handler(handler)
    try:
        loud = r.retrieve_many(QUERIES[:2])
    finally:
        get_dispatcher().event_handlers.remove(handler)
    assert [view(found) for found in loud] == [view(found) for found in quiet]
    names = [type(e).__name__ for e in handler.events]
    assert names.count("RetrievalStartEvent") == 2 and names.count("RetrievalEndEvent") == 2


@pytest.mark.parametrize("kw", [dict(search_type="dense"), dict(search_type="hybrid")])
def test_rank_many_reads_no_text_and_nodes_for_fetches_only_what_is_asked(make, milvus_client, embed_model,
                                                                         corpus_collection, kw):
    """rank_many: the kept ids and scores of retrieve, from searches that return no field; nodes_for: those nodes
    (trail included) for the asked keys only, in one get."""
    import asyncio

    expected = make(similarity_top_k=4, **kw).retrieve_many(QUERIES[:2])
    counter = CallCounter(milvus_client)
    r = MilvusHybridRetriever.from_defaults(collection_name=corpus_collection, embed_model=embed_model,
                                            client=counter, similarity_top_k=4, **kw)
    rankings = r.rank_many(QUERIES[:2])
    assert [[(k, round(s, 6)) for k, s in rk.kept] for rk in rankings] == \
        [[(n.node_id, round(n.score, 6)) for n in found] for found in expected]
    names = ["search"] if kw["search_type"] == "dense" else ["search", "search", "get", "search"]  # get: feedback
    assert [name for name, _ in counter.calls] == names and counter.outputs == [[]] * names.count("search")
    before = len(counter.calls)
    wanted = [(rankings[0], [rankings[0].kept[1][0]]), (rankings[1], [k for k, _ in rankings[1].kept[:2]])]
    got = r.nodes_for(wanted)
    assert counter.calls[before:] == [("get", 3)]
    assert view(list(got[0].values())) == view(expected[0][1:2])
    assert view(list(got[1].values())) == view(expected[1][:2])
    again = asyncio.run(make(similarity_top_k=4, **kw).anodes_for(wanted))
    assert [view(list(d.values())) for d in again] == [view(list(d.values())) for d in got]
    arankings = asyncio.run(make(similarity_top_k=4, **kw).arank_many(QUERIES[:2]))
    assert [rk.kept for rk in arankings] == [rk.kept for rk in rankings]


def test_several_query_calls_name_a_lone_query_and_keys_that_were_not_kept(make):
    import asyncio
    import re

    r = make(similarity_top_k=2)
    for call in (r.retrieve_many, r.rank_many):
        with pytest.raises(TypeError, match=r"queries must be a list of query strings or QueryBundles, got one "
                                            r"str: 'Which pets hunt mice\?'; pass \[query\]"):
            call(QUERY)
    with pytest.raises(TypeError, match="got one QueryBundle"):
        asyncio.run(r.aretrieve_many(QueryBundle(QUERY)))
    (ranking,) = r.rank_many([QUERY])
    kept = [k for k, _ in ranking.kept]
    with pytest.raises(ValueError, match=re.escape(f"key(s) ['p99'] are not among this ranking's kept candidates; "
                                                   f"kept: {kept!r}")):
        r.nodes_for([(ranking, [kept[0], "p99"])])
