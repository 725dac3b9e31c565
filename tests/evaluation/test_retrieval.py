import asyncio
import json
import math

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.vector_stores.milvus import MilvusVectorStore
from PIL import Image

from llama_index_convrag.evaluation import (build_report, load_beir, load_report, metric_table,
                                            plot_latency_distribution, plot_metric_bars, write_report)
from llama_index_convrag.evaluation.datasets import Query
from llama_index_convrag.evaluation.retrieval import (aevaluate_retriever, evaluate_retriever, evaluate_run,
                                                      metric_names, nodes_to_ranked, ranked_to_run_entry)

#: ranx scores every run here: its kernels compiled once per test run (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("ranx_compiled")

# q1: graded judgments, ranked [d3, d1, d4, d2]; q2: judged but never retrieved; q3: only a zero grade.
QRELS = {"q1": {"d1": 2, "d2": 1, "d4": 0}, "q2": {"d9": 1}, "q3": {"d5": 0}}
RUN = {"q1": {"d3": 0.9, "d1": 0.8, "d4": 0.7, "d2": 0.6}, "q3": {"d5": 1.0}, "q_unjudged": {"d1": 1.0}}


def test_ranx_matches_a_hand_computation():
    result = evaluate_run(RUN, QRELS, ks=(1, 3), metrics=("ndcg", "recall", "mrr", "hit_rate"))
    # nDCG@3 with linear gains (trec_eval / BEIR): DCG = 2/log2(3); ideal = 2/log2(2) + 1/log2(3).
    ndcg3 = (2 / math.log2(3)) / (2 / math.log2(2) + 1 / math.log2(3))
    assert result.per_query["q1"]["ndcg@3"] == pytest.approx(ndcg3, abs=1e-12)
    assert result.per_query["q1"]["ndcg@1"] == 0.0
    assert result.per_query["q1"]["recall@3"] == 0.5  # d1 in the top 3, d2 at rank 4
    assert result.per_query["q1"]["mrr@3"] == 0.5
    assert result.per_query["q1"]["hit_rate@1"] == 0.0
    assert result.per_query["q1"]["hit_rate@3"] == 1.0
    assert result.per_query["q2"] == {name: 0.0 for name in result.means}
    assert result.means["ndcg@3"] == pytest.approx(ndcg3 / 2, abs=1e-12)
    assert result.evaluated_queries == 2
    assert result.skipped_queries == ["q3"]
    assert list(result.means) == ["ndcg@1", "ndcg@3", "recall@1", "recall@3", "mrr@1", "mrr@3",
                                  "hit_rate@1", "hit_rate@3"]


@pytest.mark.parametrize(("metrics", "ks", "message"), [
    (("ndcg", "map"), (10,), r"metrics must be among \['hit_rate', 'mrr', 'ndcg', 'recall'\], got \['map'\]"),
    (("ndcg",), (0,), r"ks must be positive integers, got \[0\]"),
    (("ndcg",), (), r"ks must be positive integers, got \[\]"),
    ((), (10,), "metrics must not be empty"),
])
def test_metric_names_are_validated(metrics, ks, message):
    with pytest.raises(ValueError, match=message):
        metric_names(metrics, ks)


def test_a_run_that_retrieved_nothing_scores_zero():
    result = evaluate_run({"q1": {}}, QRELS, ks=(5,), metrics=("ndcg", "mrr"))
    assert result.means == {"ndcg@5": 0.0, "mrr@5": 0.0}
    assert result.per_query == {"q1": {"ndcg@5": 0.0, "mrr@5": 0.0}, "q2": {"ndcg@5": 0.0, "mrr@5": 0.0}}
    assert result.skipped_queries == ["q3"]


def test_qrels_without_positive_grades_are_rejected():
    with pytest.raises(ValueError, match="no query with a positive relevance grade"):
        evaluate_run(RUN, {"q3": {"d5": 0}})


def test_list_order_wins_over_scores_and_duplicates_keep_their_best_rank():
    entry = ranked_to_run_entry([("a", 0.1), ("b", 0.9), ("a", 0.95), ("c", 0.5)])
    assert entry == {"a": 4.0, "b": 3.0, "c": 1.0}


def _fake_retriever(table):
    calls = []

    def retrieve(text):
        calls.append(text)
        return table[text]

    return retrieve, calls


def test_evaluate_retriever_queries_each_judged_query_once():
    table = {"first": [("d3", 0.2), ("d1", 0.1), ("d4", 0.0), ("d2", -1.0)], "second": []}
    retrieve, calls = _fake_retriever(table)
    queries = {"q1": Query("q1", "first"), "q2": "second", "q3": "never asked", "q4": "no qrels"}
    result = evaluate_retriever(retrieve, queries, QRELS, ks=(3,), metrics=("ndcg", "recall"))
    assert calls == ["first", "second"]
    assert set(result.latencies_s) == {"q1", "q2"}
    assert all(v >= 0.0 for v in result.latencies_s.values())
    # Scores are not monotonic in the list, yet the list order is the ranking: same as the hand run above.
    expected = evaluate_run(RUN, QRELS, ks=(3,), metrics=("ndcg", "recall"))
    assert result.means == expected.means
    data = result.to_dict(top_n=2)
    assert data["per_query"]["q1"]["top_ids"] == ["d3", "d1"]
    assert data["latency"]["count"] == 2
    assert data["metrics"] == result.means


def test_async_twin_gives_the_same_result():
    table = {"first": [("d3", 0.2), ("d1", 0.1), ("d4", 0.0), ("d2", -1.0)], "second": [("d9", 1.0)]}
    calls = []

    async def aretrieve(text):
        calls.append(text)
        return table[text]

    result = asyncio.run(aevaluate_retriever(aretrieve, [Query("q1", "first"), Query("q2", "second")], QRELS,
                                             ks=(3,)))
    sync = evaluate_retriever(lambda t: table[t], {"q1": "first", "q2": "second"}, QRELS, ks=(3,))
    assert calls == ["first", "second"]
    assert result.means == sync.means
    assert result.means["ndcg@3"] == pytest.approx(
        ((2 / math.log2(3)) / (2 + 1 / math.log2(3)) + 1.0) / 2, abs=1e-12)


def test_a_malformed_retriever_result_names_the_query():
    with pytest.raises(TypeError, match="retrieve_fn must return a list of \\(doc_id, score\\) pairs; for query 'q1'"):
        evaluate_retriever(lambda t: ["d1", "d2x"], {"q1": "x"}, QRELS)


def test_no_judged_query_is_an_error():
    with pytest.raises(ValueError, match="none of the 1 queries has a positive judgment"):
        evaluate_retriever(lambda t: [], {"q3": "x"}, QRELS)


def test_nodes_to_ranked_reads_ref_doc_ids():
    from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

    chunk = TextNode(id_="chunk-1", text="a", metadata={"doc": "m1"},
                     relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-1")})
    plain = TextNode(id_="doc-2", text="b", metadata={"doc": "m2"})
    nodes = [NodeWithScore(node=chunk, score=0.5), NodeWithScore(node=plain, score=None)]
    assert nodes_to_ranked(nodes) == [("doc-1", 0.5), ("doc-2", 0.0)]
    assert nodes_to_ranked(nodes, id_key="doc") == [("m1", 0.5), ("m2", 0.0)]


# A real, small run: Cranfield docs in Milvus Lite through LlamaIndex's own VectorStoreIndex + MilvusVectorStore.
# Measured on this subset (15 queries, 100 docs cut to 40 words, all-MiniLM-L6-v2, FLAT): nDCG@10 0.722,
# R@10 0.724, MRR@10 0.867, hit@10 0.933. The floors leave room for ONNX thread-count noise and sit far above a
# random ranking of the same docs (mean of 20 seeds: nDCG@10 0.07, R@10 0.08, MRR@10 0.16, hit@10 0.42).
FLOORS = {"ndcg@10": 0.55, "recall@10": 0.55, "mrr@10": 0.7, "hit_rate@10": 0.85}
WORDS = 40  # documents are cut to their first 40 words (title + opening): embedding 100 full abstracts on a
#              loaded 2-core machine takes ~25 s, the cut ~4 s.


def test_cranfield_subset_through_llamaindex_milvus(shared_data, milvus_target, collection_name, embed_model,
                                                    tmp_path):
    data = load_beir(shared_data / "cranfield").subset(15, corpus_size=100)
    assert (len(data.queries), len(data.corpus)) == (15, 100)
    store = MilvusVectorStore(uri=milvus_target.uri, collection_name=collection_name, dim=384, overwrite=True)
    nodes = [TextNode(id_=doc.doc_id, text=" ".join(doc.text.split()[:WORDS])) for doc in data.corpus.values()]
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                             embed_model=embed_model)
    retriever = index.as_retriever(similarity_top_k=10)

    result = evaluate_retriever(lambda text: nodes_to_ranked(retriever.retrieve(text)), data.queries, data.qrels,
                                ks=(10,))
    assert result.metrics.evaluated_queries == 15
    assert all(len(ranked) == 10 for ranked in result.ranked.values())
    assert set(d for ranked in result.ranked.values() for d, _ in ranked) <= set(data.corpus)
    for name, floor in FLOORS.items():
        assert floor <= result.means[name] <= 1.0, (name, result.means)
    for scores in result.metrics.per_query.values():
        assert all(0.0 <= v <= 1.0 for v in scores.values())

    report = build_report("retrieval", config={"dataset": "cranfield", "subset": [15, 100], "top_k": 10},
                          results={"llamaindex-dense": result.to_dict()})
    path = write_report(tmp_path / "report.json", report)
    loaded = load_report(path)
    assert json.loads(path.read_text(encoding="utf-8")) == loaded
    assert loaded["results"]["llamaindex-dense"]["metrics"] == pytest.approx(result.means)
    assert loaded["results"]["llamaindex-dense"]["latency"]["count"] == 15
    assert set(loaded["results"]["llamaindex-dense"]["per_query"]) == set(data.queries)
    assert metric_table(loaded).splitlines()[2].startswith("llamaindex-dense |")

    plot_metric_bars({"llamaindex-dense": result.means}, path=tmp_path / "metrics.png")
    plot_latency_distribution({"llamaindex-dense": [v * 1000 for v in result.latencies_s.values()]},
                              path=tmp_path / "latency.png")
    for name in ("metrics.png", "latency.png"):
        with Image.open(tmp_path / name) as image:
            assert image.format == "PNG" and image.size[0] >= 600
