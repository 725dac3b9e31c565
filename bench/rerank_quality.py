"""Rerank quality on SciFact train: dense first stage from Milvus Lite, then each offline postprocessor.

Run: ``PYTHONPATH=. python bench/rerank_quality.py [--quick]``. Corpus and window embeddings are cached under
``bench/out/`` (gitignored). Rows, side by side in one run over the same candidate pools:

* LlamaIndex ``MilvusVectorStore`` dense top-K (the first stage) and its built-in MMR query mode;
* our ``ModelRerank`` with the offline ``EmbeddingScorer`` (MaxP / mean over word windows of the full text);
* our ``MMRPostprocessor`` (stored embeddings);
* context recall under a token budget: dense order filled greedily vs ``BudgetedCoverageSelector``;
* LLM rerankers: a scripted LLM has no judgement, so no quality row; instead a robustness table runs core
  ``LLMRerank`` and our ``LLMScorer`` on the same nasty replies. ``SentenceTransformerRerank`` cannot run here
  (it needs torch and a hub model), so it has no row.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Dict, List, Sequence, Tuple

import numpy as np

from _data import OUT, cached_embeddings, load_scifact, ndcg_at, recall_at  # noqa: E402  (bench/ is on sys.path)

log = logging.getLogger("bench.rerank_quality")


def build_store(ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray):
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.milvus import MilvusVectorStore

    store = MilvusVectorStore(uri=str(OUT / "rerank_bench.db"), collection_name="scifact", dim=384, overwrite=True)
    step = 1000
    for i in range(0, len(ids), step):
        store.add([TextNode(id_=ids[j], text=texts[j], embedding=vectors[j].tolist())
                   for j in range(i, min(i + step, len(ids)))])
    return store


def window_cache(embed_model, scorer, pool_ids, id_to_text, id_to_vec) -> None:
    """Seed ``scorer`` with window vectors of the pool docs: from disk, the corpus cache, or embedded now."""
    from llama_index_convrag.postprocessors.scorers.embedding import split_windows

    path = OUT / f"scifact_windows_{scorer.window_words}_{scorer.overlap_words}.npz"
    stored = dict(np.load(path)) if path.is_file() else {}
    todo, seeded = [], {}
    for did in pool_ids:
        text = id_to_text[did]
        windows = split_windows(text, scorer.window_words, scorer.overlap_words)
        if did in stored:
            seeded[text] = stored[did]
        elif windows == [text]:
            seeded[text] = id_to_vec[did][None, :]  # one window = the whole text = the corpus vector
        else:
            todo.append((did, windows))
    flat = [w for _, ws in todo for w in ws]
    log.info("window vectors: %d docs cached, %d docs (%d windows) to embed", len(seeded), len(todo), len(flat))
    start = time.perf_counter()
    vecs = np.zeros((len(flat), 384), dtype=np.float32)
    for i in range(0, len(flat), 256):
        vecs[i : i + 256] = embed_model.embed(flat[i : i + 256])
        log.info("embedded %d/%d windows (%.0f s)", min(i + 256, len(flat)), len(flat), time.perf_counter() - start)
    pos = 0
    for did, ws in todo:
        stored[did] = vecs[pos : pos + len(ws)]
        seeded[id_to_text[did]] = stored[did]
        pos += len(ws)
    if todo:
        np.savez(path, **stored)
    scorer.add_to_cache(seeded)


NASTY = [  # (reply, the document numbers a careful reader takes from it, best first)
    ("Doc: 2, Relevance: 9\nDoc: 1, Relevance: 8\n\nThe document with the highest relevance score is Doc: 2, "
     "as it answers the question.", [2, 1]),
    ('The question "great!" is not clear, therefore no documents are relevant.', []),
    ("Doc: 0, Relevance: 10\nDoc: 3, Relevance: 5", [3]),
    ("Doc: 3, Relevance: 7\nDoc: 1, Relevance: 6\nDoc: 3, Relevance: 10", [3, 1]),
    ("Doc: 2, Relevance: 9\nDoc: 1, Relevance: high\nDoc: 3, Relevance: 7", [2, 1, 3]),
    ("Doc: 2, Relevance: 9\nDoc: 4, Relevance: 8", [2]),
]


def robustness_table() -> List[Tuple[str, str, str]]:
    """Core LLMRerank vs our LLMScorer on replies that broke LlamaIndex (issues 11093, 17352, 22743, 22404)."""
    from llama_index.core.postprocessor import LLMRerank
    from llama_index.core.schema import NodeWithScore, TextNode

    from llama_index_convrag.postprocessors import ModelRerank
    from llama_index_convrag.postprocessors.scorers import LLMScorer
    from llama_index_convrag.testing import ScriptedLLM

    rows = []
    for reply, expected in NASTY:
        nodes = [NodeWithScore(node=TextNode(id_=str(i), text=f"doc {i}"), score=1.0 / i) for i in (1, 2, 3)]
        want = [str(i) for i in expected]
        try:
            got = [n.node.node_id for n in LLMRerank(llm=ScriptedLLM.fixed(reply), top_n=3)
                   .postprocess_nodes(nodes, query_str="q")]
            core = ("returns no nodes" if not got else "ok") if got == want else f"wrong {got}"
        except Exception as exc:  # noqa: BLE001 - the point is to record the crash
            core = f"raises {type(exc).__name__}"
        out = ModelRerank(LLMScorer(ScriptedLLM.fixed(reply)), top_n=3).postprocess_nodes(nodes, query_str="q")
        ours_ids = [n.node.node_id for n in out if n.score and n.score > 0]
        if out and out[0].node.metadata.get("convrag_rerank_fallback"):
            ours = "fallback: incoming order kept" if not want else "fallback (wrong)"
        else:
            ours = "ok" if ours_ids == want else f"wrong {ours_ids}"
        rows.append((reply.splitlines()[0][:38], core, ours))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="50 sampled queries, candidate pool of 20")
    parser.add_argument("--queries", type=int, default=None, help="number of sampled queries (default: all)")
    parser.add_argument("--pool", type=int, default=None, help="first-stage candidates per query (default 30)")
    parser.add_argument("--budget", type=int, default=1024, help="token budget for the coverage rows")
    parser.add_argument("--window-words", type=int, default=150, help="EmbeddingScorer window size in words")
    parser.add_argument("--overlap-words", type=int, default=30, help="EmbeddingScorer window overlap in words")
    parser.add_argument("--embed-only", action="store_true", help="only build the corpus embedding cache")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("httpx", "pymilvus", "llama_index_convrag.postprocessors"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    from llama_index.core.schema import NodeWithScore, QueryBundle
    from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
    from llama_index_convrag.postprocessors import BudgetedCoverageSelector, MMRPostprocessor, ModelRerank
    from llama_index_convrag.postprocessors.budgeted import approx_token_count
    from llama_index_convrag.postprocessors.scorers import EmbeddingScorer

    ids, texts, queries, qrels = load_scifact()
    embed_model = LocalMiniLMEmbedding()
    vectors = cached_embeddings(embed_model, texts, "scifact_corpus")  # shared with retrieval_quality.py
    if args.embed_only:
        return
    n_queries = args.queries if args.queries is not None else (50 if args.quick else len(queries))
    pool = args.pool if args.pool is not None else (20 if args.quick else 30)
    qids = sorted(queries)
    if n_queries < len(qids):
        qids = sorted(np.random.default_rng(0).choice(qids, size=n_queries, replace=False).tolist())
    id_to_text = dict(zip(ids, texts))
    id_to_vec = {d: vectors[i] for i, d in enumerate(ids)}
    qvecs = embed_model.embed([queries[q] for q in qids])

    t0 = time.perf_counter()
    store = build_store(ids, texts, vectors)
    log.info("Milvus Lite collection built in %.1f s", time.perf_counter() - t0)

    pools: Dict[str, List[NodeWithScore]] = {}
    ms: Dict[str, List[float]] = {}
    runs: Dict[str, Dict[str, List[str]]] = {}

    def record(name: str, qid: str, ranked: List[str], seconds: float) -> None:
        runs.setdefault(name, {})[qid] = ranked
        ms.setdefault(name, []).append(seconds * 1000)

    for qid, qv in zip(qids, qvecs):
        start = time.perf_counter()
        res = store.query(VectorStoreQuery(query_embedding=qv.tolist(), similarity_top_k=pool))
        took = time.perf_counter() - start
        nodes = [NodeWithScore(node=n, score=s) for n, s in zip(res.nodes, res.similarities)]
        for n in nodes:
            n.node.embedding = id_to_vec[n.node.node_id].tolist()  # the stored vector, for MMR/coverage
        pools[qid] = nodes
        record(f"dense top-{pool} (LlamaIndex MilvusVectorStore)", qid, [n.node.node_id for n in nodes], took)
        for lam in (0.5, 0.9):
            start = time.perf_counter()
            mres = store.query(VectorStoreQuery(query_embedding=qv.tolist(), similarity_top_k=10,
                                                mode=VectorStoreQueryMode.MMR),
                               mmr_threshold=lam, mmr_prefetch_k=pool)
            record(f"LlamaIndex MilvusVectorStore MMR mode, threshold={lam}", qid,
                   [n.node_id for n in mres.nodes], time.perf_counter() - start)

    pool_ids = sorted({n.node.node_id for nodes in pools.values() for n in nodes})
    windows = {"window_words": args.window_words, "overlap_words": args.overlap_words}
    scorer_max = EmbeddingScorer(embed_model, pooling="max", cache_size=len(pool_ids) + 1, **windows)
    window_cache(embed_model, scorer_max, pool_ids, id_to_text, id_to_vec)
    scorer_mean = EmbeddingScorer(embed_model, pooling="mean", cache_size=len(pool_ids) + 1, **windows)
    scorer_mean.add_to_cache(scorer_max.cached_windows())

    rerankers = {
        f"ModelRerank + EmbeddingScorer max over {scorer_max.window_words}-word windows (ours)":
            ModelRerank(scorer_max, on_error="raise"),
        f"ModelRerank + EmbeddingScorer mean over {scorer_max.window_words}-word windows (ours)":
            ModelRerank(scorer_mean, on_error="raise"),
        "MMRPostprocessor lambda=0.5 (ours)": MMRPostprocessor(lambda_mult=0.5, top_n=10),
        "MMRPostprocessor lambda=0.9 (ours)": MMRPostprocessor(lambda_mult=0.9, top_n=10),
    }
    for qid in qids:  # the first stage embedded the query; the local model's query cache then serves rerankers
        embed_model.get_query_embedding(queries[qid])
    for qid, qv in zip(qids, qvecs):
        bundle = QueryBundle(queries[qid], embedding=qv.tolist())
        for name, pp in rerankers.items():
            start = time.perf_counter()
            out = pp.postprocess_nodes(list(pools[qid]), query_bundle=bundle)
            record(name, qid, [n.node.node_id for n in out], time.perf_counter() - start)

    print(f"\nSciFact train, {len(qids)} queries, candidate pool {pool} from Milvus Lite (dense MiniLM), "
          f"{len(pool_ids)} distinct pool docs\n")
    print(f"| system | nDCG@10 | Recall@10 | Recall@{pool} | ms/query |")
    print("|---|---|---|---|---|")
    for name, run in runs.items():
        nd = np.mean([ndcg_at(run[q], qrels[q]) for q in qids])
        r10 = np.mean([recall_at(run[q], qrels[q], 10) for q in qids])
        rk = np.mean([recall_at(run[q], qrels[q], pool) for q in qids])
        print(f"| {name} | {nd:.3f} | {r10:.3f} | {rk:.3f} | {np.median(ms[name]):.1f} |")

    # context under a token budget ------------------------------------------------------------------
    budget = args.budget
    exponents = ((1.0, 0.0), (0.0, 0.0), (1.0, 3.0), (0.0, 3.0))  # (cost_exponent, relevance_weight)
    selectors = {r: BudgetedCoverageSelector(budget, cost_exponent=r[0], relevance_weight=r[1]) for r in exponents}
    fill_recall, fill_tokens = [], []
    cov: Dict[tuple, Dict[str, List[float]]] = {r: {"recall": [], "tokens": [], "ms": []} for r in exponents}
    for qid, qv in zip(qids, qvecs):
        nodes, rels = pools[qid], qrels[qid]
        used, chosen = 0, []
        for n in nodes:  # dense order, skipping what no longer fits
            cost = approx_token_count(n.node.get_content(metadata_mode="llm"))
            if used + cost <= budget:
                chosen.append(n.node.node_id)
                used += cost
        fill_recall.append(recall_at(chosen, rels, len(chosen)))
        fill_tokens.append(used)
        bundle = QueryBundle(queries[qid], embedding=qv.tolist())
        for r, selector in selectors.items():
            start = time.perf_counter()
            out = selector.postprocess_nodes(list(nodes), query_bundle=bundle)
            cov[r]["ms"].append((time.perf_counter() - start) * 1000)
            picked = [n.node.node_id for n in out]
            cov[r]["recall"].append(recall_at(picked, rels, len(picked)))
            cov[r]["tokens"].append(sum(approx_token_count(n.node.get_content(metadata_mode="llm")) for n in out))
    print(f"\nContext under a {budget}-token budget (approx. 4 chars/token), same pools\n")
    print("| selection | context recall | tokens used (mean) | ms/query |")
    print("|---|---|---|---|")
    print(f"| dense order, greedy fill | {np.mean(fill_recall):.3f} | {np.mean(fill_tokens):.0f} | - |")
    for r in exponents:
        print(f"| BudgetedCoverageSelector cost_exponent={r[0]}, relevance_weight={r[1]} (ours) | "
              f"{np.mean(cov[r]['recall']):.3f} | "
              f"{np.mean(cov[r]['tokens']):.0f} | {np.median(cov[r]['ms']):.1f} |")

    print("\nLLM rerank parsing on nasty replies (scripted; no quality claim)\n")
    print("| reply (first line) | core LLMRerank | ours (ModelRerank + LLMScorer) |")
    print("|---|---|---|")
    for reply, core, ours in robustness_table():
        print(f"| {reply!r} | {core} | {ours} |")


if __name__ == "__main__":
    main()
