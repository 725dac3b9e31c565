"""Retrieval latency (p50/p95 ms, QPS) at top-10: ours vs raw pymilvus (same request) vs LlamaIndex's retriever.

Sizes: 5k = the SciFact corpus with its real MiniLM embeddings; 20k = SciFact abstracts cut into overlapping
~120-word windows (real text for BM25). Embedding 20k windows takes >20 min on 2 shared cores, so each window's
vector is its source abstract's real embedding plus seeded Gaussian noise (sigma 0.02), re-normalised: fine for
latency (FLAT search cost does not depend on the values), meaningless for quality. Query vectors are precomputed
(the real query embeddings); systems of one mode run interleaved on the same queries; query embedding time is measured separately. Raw pymilvus requests the same output
fields as ours (text, doc_id, metadata) and reads every hit (pymilvus decodes results lazily). For weighted fusion
(ours: two searches returning ids and scores, fusion, one ``get`` of the kept rows) the base row sends those same
requests; the row below it is the naive way (two searches returning every hit's fields).

    PYTHONPATH=. python bench/retrieval_latency.py [--quick]
    PYTHONPATH=. python bench/retrieval_latency.py --with-embedding [--quick]

``--with-embedding``: the query embedded on every request (cache off), for each variant of the local model (``fp32``,
``int8``), on the 5k collection, every cell interleaved: the model alone (one query: the ceiling of any system that
embeds the query here), raw pymilvus after embedding (dense search; the two id-and-score searches and one ``get``
that weighted fusion sends), and ours (dense; the default hybrid with dense feedback).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, assert_variant, cached_embeddings, fresh_dir, load_scifact  # noqa: E402

from llama_index.core.schema import QueryBundle, TextNode  # noqa: E402
from pymilvus import AnnSearchRequest, MilvusClient, RRFRanker  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.milvus.schema import create_collection, default_spec  # noqa: E402
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever  # noqa: E402

BM25 = {"metric_type": "BM25", "params": {"drop_ratio_search": 0.0}}
COS = {"metric_type": "COSINE", "params": {}}
FIELDS = ["text", "doc_id", "metadata"]
TOP_K = 10


def windows(texts: Sequence[str], vecs: np.ndarray, n: int, size: int = 120, stride: int = 40,
            seed: int = 7) -> Tuple[List[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    out_t, src = [], []
    for i, t in enumerate(texts):
        words = t.split()
        for start in range(0, max(1, len(words) - size // 2), stride):
            out_t.append(" ".join(words[start : start + size]))
            src.append(i)
    out_t, src = out_t[:n], np.asarray(src[:n])
    v = vecs[src] + rng.normal(0, 0.02, size=(len(src), vecs.shape[1])).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return out_t, v


def consume(res: object) -> list:
    """Read every hit (pymilvus decodes lazily; any caller reads ids, scores and fields)."""
    return [(h["id"], h["distance"], h["entity"]) for h in res[0]]


def summary(lat: List[float]) -> Dict[str, float]:
    lat = sorted(lat)
    return {"p50": statistics.median(lat), "p95": lat[int(0.95 * (len(lat) - 1))], "qps": 1000 * len(lat) / sum(lat)}


def timed(fn: Callable[[int], object], n: int, warmup: int = 10) -> Dict[str, float]:
    for i in range(warmup):
        fn(i)
    lat = []
    for i in range(n):
        s = time.perf_counter()
        fn(i)
        lat.append(1000 * (time.perf_counter() - s))
    return summary(lat)


def interleaved(fns: Sequence[Callable[[int], object]], n: int, warmup: int = 10) -> List[Dict[str, float]]:
    """Time several systems on the same queries, rotating their order per query (fair on a noisy machine)."""
    for fn in fns:
        for i in range(warmup):
            fn(i)
    lat: List[List[float]] = [[] for _ in fns]
    for i in range(n):
        for j in range(len(fns)):
            k = (i + j) % len(fns)
            s = time.perf_counter()
            fns[k](i)
            lat[k].append(1000 * (time.perf_counter() - s))
    # paired: the median over queries of each system's time over the first system's on the same query (load that
    # drifts during the run cancels out, unlike a ratio of two medians)
    return [{**summary(x), "paired": statistics.median(a / b for a, b in zip(x, lat[0]))} for x in lat]


def build(client: MilvusClient, uri: str, tag: str, texts: List[str], vecs: np.ndarray) -> Tuple[str, object]:
    from llama_index.vector_stores.milvus import MilvusVectorStore

    name = f"ours_{tag}"
    create_collection(client, name, default_spec(384))
    rows = [{"id": str(i), "doc_id": f"d{i}", "text": t, "embedding": v.tolist(), "metadata": {"n": i}}
            for i, (t, v) in enumerate(zip(texts, vecs))]
    t0 = time.perf_counter()
    for i in range(0, len(rows), 1000):
        client.insert(name, rows[i : i + 1000])
    ours_s = time.perf_counter() - t0
    li = MilvusVectorStore(uri=uri, collection_name=f"li_{tag}", dim=384, enable_sparse=True, similarity_metric="IP")
    nodes = [TextNode(id_=str(i), text=t, embedding=v.tolist()) for i, (t, v) in enumerate(zip(texts, vecs))]
    t0 = time.perf_counter()
    li.add(nodes)
    li_s = time.perf_counter() - t0
    print(f"  insert {len(rows)} rows: ours {len(rows) / ours_s:.0f} rows/s, LlamaIndex add {len(rows) / li_s:.0f} rows/s")
    return name, li


def with_embedding(client: MilvusClient, name: str, qtexts: List[str], n: int) -> List[Dict[str, object]]:
    """p50 of each variant's cells with the query embedded per request, interleaved (see the module docstring)."""
    cells = []
    for variant in ("fp32", "int8"):
        model = LocalMiniLMEmbedding(variant=variant, query_cache_size=0)
        model.warm_up()
        assert_variant(model, variant)

        def embed(i: int, m: LocalMiniLMEmbedding = model) -> List[float]:
            return m.get_query_embedding(qtexts[i % len(qtexts)])

        def raw_dense(i: int, e: Callable[[int], List[float]] = embed) -> object:
            return consume(client.search(name, data=[e(i)], anns_field="embedding", limit=TOP_K, search_params=COS,
                                         output_fields=FIELDS))

        def raw_lean(i: int, e: Callable[[int], List[float]] = embed) -> object:
            dense = client.search(name, data=[e(i)], anns_field="embedding", limit=100, search_params=COS,
                                  output_fields=[])[0]
            sparse = client.search(name, data=[qtexts[i % len(qtexts)]], anns_field="sparse_embedding", limit=100,
                                   search_params=BM25, output_fields=[])[0]
            return client.get(name, ids=list(dict.fromkeys([*dense.ids[:5], *sparse.ids]))[:TOP_K],
                              output_fields=FIELDS)

        def ours(m: LocalMiniLMEmbedding = model, **kw: object) -> Callable[[int], object]:
            r = MilvusHybridRetriever.from_defaults(collection_name=name, client=client, embed_model=m,
                                                    similarity_top_k=TOP_K, **kw)
            return lambda i: r.retrieve(qtexts[i % len(qtexts)])

        cells += [(variant, "the model alone (query embedding)", embed),
                  (variant, "raw pymilvus dense search + embedding", raw_dense),
                  (variant, "ours dense, embedding included", ours(search_type="dense")),
                  (variant, "raw 2x search(100) ids + get(10) + embedding", raw_lean),
                  (variant, "ours default (weighted + feedback), embedding included", ours())]
    stats = interleaved([c[2] for c in cells], n)
    out = []
    print(f"  {'variant':7s} {'system':56s} {'p50 ms':>7s} {'p95 ms':>7s}  paired vs fp32's model alone")
    for (variant, system, _), m in zip(cells, stats):
        print(f"  {variant:7s} {system:56s} {m['p50']:7.2f} {m['p95']:7.2f}  {m['paired']:6.2f}", flush=True)
        out.append({"variant": variant, "system": system, **m})
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="60 timed queries per cell, 5k and 20k")
    ap.add_argument("--with-embedding", action="store_true", help="instead: each variant with the query embedded")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    n = 60 if args.quick else 200
    model = LocalMiniLMEmbedding()
    doc_ids, texts, queries, _ = load_scifact()
    dvecs = cached_embeddings(model, texts, "scifact_corpus")
    qvecs = cached_embeddings(model, list(queries.values()), "scifact_queries")
    qtexts = list(queries.values())

    if args.with_embedding:
        db = fresh_dir("latency_embedding_milvus")
        client = MilvusClient(str(db / "latency.db"))
        build(client, str(db / "latency.db"), "5k", list(texts), np.asarray(dvecs))
        print(f"== 5k: {len(texts)} passages, top-{TOP_K}, {n} queries, each embedded on every request ==")
        rows = with_embedding(client, "ours_5k", qtexts, n)
        (OUT / "retrieval_latency_embedding.json").write_text(json.dumps(rows, indent=1))
        client.close()
        return
    model.warm_up()
    emb = timed(lambda i: model.embed([qtexts[i % len(qtexts)]]), 50, warmup=5)
    print(f"query embedding (MiniLM ONNX, uncached): p50 {emb['p50']:.1f} ms, p95 {emb['p95']:.1f} ms\n")

    db = fresh_dir("latency_milvus")
    uri = str(db / "latency.db")
    client = MilvusClient(uri)
    from llama_index.core import VectorStoreIndex

    results = []
    for tag, (ptexts, pvecs) in {"5k": (texts, dvecs), "20k": windows(texts, dvecs, 20_000)}.items():
        print(f"== {tag}: {len(ptexts)} passages, top-{TOP_K}, {n} queries, single thread ==")
        name, li = build(client, uri, tag, list(ptexts), np.asarray(pvecs))
        li_index = VectorStoreIndex.from_vector_store(li, embed_model=model)

        def qb(i: int) -> QueryBundle:
            j = i % len(qtexts)
            return QueryBundle(qtexts[j], embedding=qvecs[j].tolist())

        def ours(**kw):
            r = MilvusHybridRetriever.from_defaults(collection_name=name, client=client, embed_model=model,
                                                    similarity_top_k=TOP_K, **kw)
            return lambda i: r.retrieve(qb(i))

        def li_ret(mode: str):
            r = li_index.as_retriever(similarity_top_k=TOP_K, vector_store_query_mode=mode)
            return lambda i: r.retrieve(qb(i))

        def raw_search(field: str, k: int = TOP_K):
            def run(i: int):
                b = qb(i)
                data = b.query_str if field == "sparse_embedding" else b.embedding
                res = client.search(name, data=[data], anns_field=field, limit=k,
                                    search_params=BM25 if field == "sparse_embedding" else COS, output_fields=FIELDS)
                return consume(res)
            return run

        def raw_hybrid(i: int):
            b = qb(i)
            reqs = [AnnSearchRequest([b.embedding], "embedding", COS, TOP_K),
                    AnnSearchRequest([b.query_str], "sparse_embedding", BM25, TOP_K)]
            return consume(client.hybrid_search(name, reqs, RRFRanker(60), limit=TOP_K, output_fields=FIELDS))

        def raw_two(i: int):
            raw_search("embedding", 100)(i)
            return raw_search("sparse_embedding", 100)(i)

        def raw_two_lean(i: int):
            """What ours sends for weighted fusion: two id-and-score searches, then one get of the 10 kept rows
            (here the first 10 ids of the two lists: the fusion itself is ours)."""
            b = qb(i)
            dense = client.search(name, data=[b.embedding], anns_field="embedding", limit=100, search_params=COS,
                                  output_fields=[])[0]
            sparse = client.search(name, data=[b.query_str], anns_field="sparse_embedding", limit=100,
                                   search_params=BM25, output_fields=[])[0]
            keep = list(dict.fromkeys([*dense.ids[:5], *sparse.ids]))[:TOP_K]
            return client.get(name, ids=keep, output_fields=FIELDS)

        cells = [
            ("dense", "raw pymilvus search", raw_search("embedding")),
            ("dense", "ours", ours(search_type="dense")),
            ("dense", "LlamaIndex retriever", li_ret("default")),
            ("BM25", "raw pymilvus search", raw_search("sparse_embedding")),
            ("BM25", "ours", ours(search_type="sparse")),
            ("BM25", "LlamaIndex retriever", li_ret("sparse")),
            ("hybrid RRF", "raw pymilvus hybrid_search", raw_hybrid),
            ("hybrid RRF", "ours", ours(search_type="hybrid", ranker_type="rrf")),
            ("hybrid RRF", "ours explain=True (2 searches)", ours(search_type="hybrid", ranker_type="rrf", explain=True)),
            ("hybrid RRF", "LlamaIndex retriever", li_ret("hybrid")),
            ("weighted d100", "raw 2x search(100) ids + get(10)", raw_two_lean),
            ("weighted d100", "raw 2x search(100) with fields", raw_two),
            ("weighted d100", "ours (client min-max fusion)", ours(search_type="hybrid", ranker_type="weighted",
                                                                    feedback=False)),  # single round, as raw
        ]
        print(f"  {'mode':14s} {'system':32s} {'p50 ms':>7s} {'p95 ms':>7s} {'QPS':>6s}  ratio p50 vs raw  paired")
        for mode in dict.fromkeys(c[0] for c in cells):
            group = [c for c in cells if c[0] == mode]
            stats = interleaved([c[2] for c in group], n)
            base = stats[0]["p50"]  # the raw pymilvus cell comes first in each group
            for (_, system, _), m in zip(group, stats):
                ratio = m["p50"] / base
                print(f"  {mode:14s} {system:32s} {m['p50']:7.2f} {m['p95']:7.2f} {m['qps']:6.0f}  {ratio:16.2f}  "
                      f"{m['paired']:6.2f}", flush=True)
                results.append({"size": tag, "mode": mode, "system": system, **m, "ratio_p50": ratio})
        print()
    out = OUT / ("retrieval_latency_quick.json" if args.quick else "retrieval_latency.json")
    out.write_text(json.dumps({"query_embedding": emb, "results": results}, indent=1))
    print(f"written {out}")
    client.close()


if __name__ == "__main__":
    main()
