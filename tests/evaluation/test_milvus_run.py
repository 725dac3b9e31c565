"""A real, small run: Cranfield docs in Milvus Lite through LlamaIndex's own VectorStoreIndex + MilvusVectorStore."""

import json

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.vector_stores.milvus import MilvusVectorStore
from PIL import Image

from llama_index_convrag.evaluation import (build_report, evaluate_retriever, load_beir, load_report,
                                            metric_table, nodes_to_ranked, plot_latency_distribution,
                                            plot_metric_bars, write_report)

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
