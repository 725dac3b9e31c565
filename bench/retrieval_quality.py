"""Retrieval quality on SciFact train (809 queries, 5,183 abstracts): nDCG@10 and Recall@100.

Ours (MilvusHybridRetriever: dense / BM25 / hybrid RRF / hybrid normalised-weighted / two-stage rerank) side by side
with LlamaIndex's MilvusVectorStore (enable_sparse=True, its BM25 built-in function) and raw pymilvus, all on the
same cached MiniLM embeddings (bench/out/*.npy). Query embedding is excluded (precomputed vectors are passed in).

    PYTHONPATH=. python bench/retrieval_quality.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, cached_embeddings, fresh_dir, load_scifact, ndcg_at, recall_at  # noqa: E402

from llama_index.core.bridge.pydantic import PrivateAttr  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from pymilvus import AnnSearchRequest, MilvusClient, RRFRanker  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.milvus.schema import create_collection, default_spec  # noqa: E402
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever  # noqa: E402

log = logging.getLogger("bench.quality")
BM25 = {"metric_type": "BM25", "params": {"drop_ratio_search": 0.0}}
COS = {"metric_type": "COSINE", "params": {}}


class CachedEmbeddingRerank(BaseNodePostprocessor):
    """Second stage for the bench: cosine of the query vector with each candidate's cached passage vector.

    A stand-in for a cross-encoder (none can be downloaded here); it reorders hybrid candidates by dense similarity.
    """

    _vectors: Dict[str, np.ndarray] = PrivateAttr()

    def __init__(self, vectors: Dict[str, np.ndarray]) -> None:
        super().__init__()
        self._vectors = vectors

    def _postprocess_nodes(self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
                           ) -> List[NodeWithScore]:
        q = np.asarray(query_bundle.embedding, dtype=np.float32)
        return [NodeWithScore(node=n.node, score=float(self._vectors[n.node_id] @ q)) for n in nodes]


def evaluate(name: str, run: Callable[[str, str, List[float]], List[str]], queries: Dict[str, str],
             qvecs: Dict[str, List[float]], qrels: Dict[str, Dict[str, int]]) -> Dict[str, float]:
    nd, rc = [], []
    t0 = time.perf_counter()
    for qid, text in queries.items():
        ranked = run(qid, text, qvecs[qid])
        nd.append(ndcg_at(ranked, qrels[qid], 10))
        rc.append(recall_at(ranked, qrels[qid], 100))
    row = {"system": name, "ndcg@10": float(np.mean(nd)), "recall@100": float(np.mean(rc)),
           "ms/query": 1000 * (time.perf_counter() - t0) / len(queries)}
    print(f"{name:58s} {row['ndcg@10']:.3f}   {row['recall@100']:.3f}   {row['ms/query']:7.1f}", flush=True)
    return row


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="first 150 queries over a 1,500-document subset")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    model = LocalMiniLMEmbedding()
    doc_ids, texts, queries, qrels = load_scifact()
    full_cache = list(OUT.glob("emb_scifact_corpus_*.npy"))
    if args.quick:
        qids = list(queries)[:150]
        queries = {q: queries[q] for q in qids}
        keep = {d for q in qids for d in qrels[q]}
        rest = [d for d in doc_ids if d not in keep][: 1500 - len(keep)]
        subset = keep | set(rest)
        idx = [i for i, d in enumerate(doc_ids) if d in subset]
        doc_vecs_all = cached_embeddings(model, texts, "scifact_corpus") if full_cache else None
        doc_ids = [doc_ids[i] for i in idx]
        texts = [texts[i] for i in idx]
        doc_vecs = doc_vecs_all[idx] if doc_vecs_all is not None else cached_embeddings(model, texts, "scifact_quick")
    else:
        doc_vecs = cached_embeddings(model, texts, "scifact_corpus")
    all_q = load_scifact()[2]
    qv_all = cached_embeddings(model, list(all_q.values()), "scifact_queries")
    qvecs = {q: v.tolist() for q, v in zip(all_q, qv_all) if q in queries}
    qrels = {q: qrels[q] for q in queries}
    print(f"SciFact train: {len(doc_ids)} documents, {len(queries)} queries; MiniLM-L6 384-d; top-100 lists\n")

    db = fresh_dir("quality_milvus")
    uri = str(db / "quality.db")
    client = MilvusClient(uri)
    ours = "ours"
    create_collection(client, ours, default_spec(384))
    rows = [{"id": d, "doc_id": d, "text": t, "embedding": v.tolist(), "metadata": {}}
            for d, t, v in zip(doc_ids, texts, doc_vecs)]
    for i in range(0, len(rows), 500):
        client.insert(ours, rows[i : i + 500])

    from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
    from llama_index.vector_stores.milvus import MilvusVectorStore
    from llama_index.vector_stores.milvus.utils import BM25BuiltInFunction

    li = MilvusVectorStore(uri=uri, collection_name="llamaindex", dim=384, enable_sparse=True,
                           similarity_metric="IP")
    nodes = [TextNode(id_=d, text=t, embedding=v.tolist()) for d, t, v in zip(doc_ids, texts, doc_vecs)]
    li.add(nodes)

    def retr(**kw) -> MilvusHybridRetriever:
        return MilvusHybridRetriever.from_defaults(collection_name=ours, client=client, embed_model=model, **kw)

    def ours_run(r: MilvusHybridRetriever) -> Callable:
        return lambda qid, text, vec: [n.node_id for n in r.retrieve(QueryBundle(text, embedding=vec))]

    def raw_dense(qid, text, vec):
        return [h["id"] for h in client.search(ours, data=[vec], anns_field="embedding", limit=100,
                                               search_params=COS)[0]]

    def raw_sparse(qid, text, vec):
        return [h["id"] for h in client.search(ours, data=[text], anns_field="sparse_embedding", limit=100,
                                               search_params=BM25)[0]]

    def raw_rrf(qid, text, vec):
        reqs = [AnnSearchRequest([vec], "embedding", COS, 100), AnnSearchRequest([text], "sparse_embedding", BM25, 100)]
        return [h["id"] for h in client.hybrid_search(ours, reqs, RRFRanker(60), limit=100)[0]]

    def li_run(mode) -> Callable:
        def run(qid, text, vec):
            res = li.query(VectorStoreQuery(query_embedding=vec, query_str=text, similarity_top_k=100, mode=mode))
            return list(res.ids)
        return run

    li_w = MilvusVectorStore(uri=uri, collection_name="llamaindex", dim=384, enable_sparse=True,
                             similarity_metric="IP", hybrid_ranker="WeightedRanker",
                             sparse_embedding_function=BM25BuiltInFunction(),  # Lite does not list functions
                             hybrid_ranker_params={"weights": [0.5, 0.5]})

    def li_weighted(qid, text, vec):
        res = li_w.query(VectorStoreQuery(query_embedding=vec, query_str=text, similarity_top_k=100,
                                          mode=VectorStoreQueryMode.HYBRID))
        return list(res.ids)

    rerank = CachedEmbeddingRerank({d: v for d, v in zip(doc_ids, doc_vecs)})
    systems = [
        ("ours dense", ours_run(retr(search_type="dense", similarity_top_k=100))),
        ("ours sparse (BM25, english analyzer)", ours_run(retr(search_type="sparse", similarity_top_k=100))),
        ("ours hybrid RRF k=60, depth 100", ours_run(retr(search_type="hybrid", ranker_type="rrf", similarity_top_k=100))),
        ("ours hybrid RRF k=60, depth 100, explain (client fusion)",
         ours_run(retr(search_type="hybrid", ranker_type="rrf", similarity_top_k=100, explain=True))),
        ("ours hybrid weighted 0.5/0.5 min-max, depth 100",
         ours_run(retr(search_type="hybrid", ranker_type="weighted", similarity_top_k=100, feedback=False))),
        ("ours hybrid weighted 0.5/0.5 + dense feedback (the default)",
         ours_run(retr(search_type="hybrid", ranker_type="weighted", similarity_top_k=100))),
        ("ours hybrid weighted 0.3/0.7 min-max, depth 100",
         ours_run(retr(search_type="hybrid", ranker_type="weighted", similarity_top_k=100,
                       ranker_params={"weights": [0.3, 0.7]}, feedback=False))),
        ("ours hybrid RRF -> embedding rerank (pre_topk=100)",
         ours_run(retr(search_type="hybrid", ranker_type="model", similarity_top_k=100,
                       ranker_params={"model": rerank, "pre_topk": 100, "pre_ranker_type": "rrf"}))),
        ("ours weighted -> embedding rerank (pre_topk=20) [top-20 only]",
         ours_run(retr(search_type="hybrid", ranker_type="model", similarity_top_k=20,
                       ranker_params={"model": rerank, "pre_topk": 20, "pre_ranker_type": "weighted"}))),
        ("raw pymilvus dense", raw_dense),
        ("raw pymilvus BM25", raw_sparse),
        ("raw pymilvus hybrid_search RRFRanker(60)", raw_rrf),
        ("LlamaIndex MilvusVectorStore dense", li_run(VectorStoreQueryMode.DEFAULT)),
        ("LlamaIndex MilvusVectorStore sparse (BM25 built-in, standard)", li_run(VectorStoreQueryMode.SPARSE)),
        ("LlamaIndex MilvusVectorStore hybrid RRFRanker(60)", li_run(VectorStoreQueryMode.HYBRID)),
        ("LlamaIndex MilvusVectorStore hybrid WeightedRanker(0.5,0.5)", li_weighted),
    ]
    print(f"{'system':58s} nDCG@10 Recall@100 ms/query")
    results = [evaluate(name, run, queries, qvecs, qrels) for name, run in systems]
    rrf10 = retr(search_type="hybrid", ranker_type="rrf", similarity_top_k=10)
    results.append(evaluate("ours hybrid RRF k=60, depth 10 (nDCG only; recall@100 n/a)", ours_run(rrf10),
                            queries, qvecs, qrels))
    out = OUT / ("retrieval_quality_quick.json" if args.quick else "retrieval_quality.json")
    out.write_text(json.dumps({"documents": len(doc_ids), "queries": len(queries), "results": results}, indent=1))
    print(f"\nwritten {out}")
    client.close()


if __name__ == "__main__":
    main()
