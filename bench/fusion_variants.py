"""Offline ways past the default hybrid, each measured on SciFact train, Cranfield and CAsT 2021 passages.

The default (``base``) is dense top-100 (one vector per text, truncated to MiniLM's 256-word-piece window) fused with
Milvus BM25 top-100 (english analyzer, k1 1.2, b 0.75) by per-query min-max weighted fusion 0.5/0.5. Variants:

* ``s2b``: small-to-big: dense over windows of the text (children of <= 254 word pieces, 64 overlapping), a parent's
  dense score = its best child's (children deduplicated to parents), BM25 on the parent;
* ``3way``: the stored vector, the window MaxP list and BM25 fused (0.25 / 0.25 / 0.5);
* ``bm25 k1/b``: Milvus' BM25 index parameters (``bm25_k1`` / ``bm25_b`` of the sparse index);
* ``zscore``: fusion with per-query z-score normalisation (each list standardised over its top-100) instead of
  min-max;
* ``dprf``: dense pseudo-relevance feedback (Rocchio on vectors): q' = q + beta * mean of the stored vectors of the
  top-k fused hits, a second dense search, fused again with the same BM25 list;
* ``lprf``: lexical pseudo-relevance feedback (RM3-like): the query text, twice, plus the ``n`` terms with the
  highest summed tf-idf weight in the top-k fused hits, searched again with BM25 and fused with the first dense list;
* ``sent`` (``--sentences``): dense MaxP over overlapping pairs of consecutive sentences (a text's score = its best
  pair's), fused with BM25 alone or with the stored vector too (3-way);
* ``conf``: per-query field weights from each list's own confidence (the gap between its top score and its 10th,
  in units of its top-100 spread), w_dense = conf_d / (conf_d + conf_s).

Reuses the caches of ``bench/quality_matrix.py`` (same tags). Prints nDCG@10 / hit@5 per collection.

    PYTHONPATH=. python bench/fusion_variants.py [--collections cranfield,cast,scifact] [--bm25-grid]
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, cached_embeddings, fresh_dir, ndcg_at  # noqa: E402
from quality_matrix import (  # noqa: E402
    DEPTH,
    bm25_lists,
    dense_lists,
    hit_at,
    load_collection,
    window_texts,
    window_vectors,
)

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.retrievers import fusion  # noqa: E402

log = logging.getLogger("bench.fusion_variants")
Ranked = List[Tuple[str, float]]


TOKEN = re.compile(r"[a-z][a-z0-9-]{2,}")
STOP = frozenset("""the and for are but not you all any can had her was one our out has his how its may new now
old see two way who did get him let say she too use that with have this will your from they been than them then were
what when which while into over such also more most other some these those their there where would could should
about after before between during under very each both only same just does doing being because through within without
among across against upon using used based""".split())


def expansion_terms(query: str, docs: Sequence[str], df: Dict[str, int], n_docs: int, n: int) -> List[str]:
    """The ``n`` terms (not in the query) with the highest summed length-normalised tf x idf over ``docs``."""
    have = set(TOKEN.findall(query.lower()))
    weight: Dict[str, float] = {}
    for text in docs:
        toks = [t for t in TOKEN.findall(text.lower()) if t not in STOP]
        for t in set(toks):
            if t in have:
                continue
            idf = float(np.log((n_docs + 1) / (df.get(t, 0) + 0.5)))
            weight[t] = weight.get(t, 0.0) + toks.count(t) / len(toks) * idf
    return [t for t, _ in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


def sentence_pairs(text: str, min_words: int = 6) -> List[str]:
    """A text's sentences (a split before a capital, digit or bracket after ``.!?``; sentences under ``min_words``
    words joined to the next) as overlapping pairs of consecutive sentences; the text itself when it has one."""
    out: List[str] = []
    for part in (p.strip() for p in SENTENCE_END.split(text) if p.strip()):
        if out and len(out[-1].split()) < min_words:
            out[-1] = out[-1] + " " + part
        else:
            out.append(part)
    if len(out) <= 2:
        return [" ".join(out)] if out else [text]
    return [" ".join(out[i : i + 2]) for i in range(len(out) - 1)]


def zscore_fuse(lists: Sequence[Ranked], weights: Sequence[float]) -> Ranked:
    scores: Dict[str, float] = {}
    for ranked, w in zip(lists, weights):
        if not ranked:
            continue
        v = np.asarray([s for _, s in ranked])
        mu, sd = float(v.mean()), float(v.std()) or 1.0
        floor = (float(v.min()) - mu) / sd  # an id missing from a list gets that list's lowest score
        for d, s in ranked:
            scores[d] = scores.get(d, 0.0) + w * ((s - mu) / sd - floor)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def confidence(ranked: Ranked) -> float:
    v = [s for _, s in ranked]
    if len(v) < 11 or v[0] == v[-1]:
        return 1.0
    return (v[0] - v[9]) / (v[0] - v[-1])


def weighted(lists: Sequence[Ranked], weights: Sequence[float]) -> Ranked:
    return [(str(d), s) for d, s in fusion.weighted(lists, weights)]


def library_runs(model: LocalMiniLMEmbedding, name: str, ids: Sequence[str], texts: Sequence[str], first: np.ndarray, qids: Sequence[str],
                 queries: Dict[str, str], qv: np.ndarray) -> Dict[str, Dict[str, List[str]]]:
    """The library's retriever itself over a Milvus Lite collection of the cached vectors (FLAT, COSINE): its
    default (``as_retriever()``) and the same with ``feedback=False``; top-10 doc ids per query."""
    from llama_index.core.schema import QueryBundle
    from pymilvus import MilvusClient

    from llama_index_convrag.milvus.schema import create_collection, default_spec
    from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever

    db = fresh_dir(f"library_{name}_milvus")
    client = MilvusClient(str(db / "lib.db"))
    create_collection(client, "c", default_spec(first.shape[1]))
    rows = [{"id": d, "doc_id": d, "text": t, "embedding": v.tolist(), "metadata": {}}
            for d, t, v in zip(ids, texts, first)]
    for i in range(0, len(rows), 500):
        client.insert("c", rows[i : i + 500])
    out: Dict[str, Dict[str, List[str]]] = {}
    configs = (("library default (as_retriever())", {}), ("library feedback=False", {"feedback": False}))
    retrievers = {label: MilvusHybridRetriever.from_defaults(collection_name="c", client=client, embed_model=model,
                                                             similarity_top_k=10, **kw) for label, kw in configs}
    ms: Dict[str, List[float]] = {label: [] for label in retrievers}
    for i, q in enumerate(qids):
        bundle = QueryBundle(queries[q], embedding=qv[i].tolist())
        for label, r in (retrievers.items() if i % 2 == 0 else reversed(list(retrievers.items()))):  # interleaved
            t0 = time.perf_counter()
            nodes = r.retrieve(bundle)
            ms[label].append(1000 * (time.perf_counter() - t0))
            out.setdefault(label, {})[q] = [n.node.ref_doc_id for n in nodes]
    print(f"\n{name} retrieval p50 ms (query embedding excluded): " +
          ", ".join(f"{label} {np.median(v):.1f}" for label, v in ms.items()))
    client.close()
    shutil.rmtree(db, ignore_errors=True)
    return out


def paul_graham_coverage(model: LocalMiniLMEmbedding) -> None:
    """Chunk coverage of the essay at the default chunking: what one vector per chunk reads, and windows."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    from llama_index_convrag.embeddings.windows import window_spans
    from llama_index_convrag.ingest.pipeline import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE

    from _data import shared_data

    text = (shared_data() / "paul_graham" / "paul_graham_essay.txt").read_text(encoding="utf-8")
    nodes = SentenceSplitter(chunk_size=DEFAULT_CHUNK_SIZE, chunk_overlap=DEFAULT_CHUNK_OVERLAP
                             ).get_nodes_from_documents([Document(text=text)])
    chunks = [n.get_content() for n in nodes]
    counts = model.count_tokens(chunks)
    window = model.max_input_tokens
    read = sum(min(c, window) for c in counts) / sum(counts)
    n_windows = sum(len(window_spans(c, model, 64)) for c in chunks)
    print(f"\nPaul Graham essay, chunking {DEFAULT_CHUNK_SIZE}/{DEFAULT_CHUNK_OVERLAP}: {len(chunks)} chunks, "
          f"{sum(c > window for c in counts)} past the {window}-token window, {np.mean(counts):.0f} word pieces on "
          f"average; one vector per chunk reads {read:.0%} of the word pieces; windows of the model (64 overlap): "
          f"{n_windows} vectors ({n_windows / len(chunks):.1f}x)")


def per_query(runs: Dict[str, List[str]], qrels: Dict[str, Dict[str, int]]) -> np.ndarray:
    """(queries x 2): nDCG@10 and hit@5 per query."""
    return np.asarray([(ndcg_at(runs[q], qrels[q], 10), hit_at(runs[q], qrels[q])) for q in runs])


def paired(a: np.ndarray, b: np.ndarray) -> str:
    """Mean of b - a and its 95% interval (normal approximation over queries)."""
    d = b - a
    half = 1.96 * d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else 0.0
    return f"{d.mean():+.3f} [{d.mean() - half:+.3f}, {d.mean() + half:+.3f}]"


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collections", default="cranfield,cast,scifact")
    ap.add_argument("--bm25-grid", action="store_true", help="also BM25 k1 in {0.9, 1.2, 1.5} x b in {0.4, 0.75, 0.9}")
    ap.add_argument("--library", action="store_true", help="also run the library retriever (default vs feedback off)")
    ap.add_argument("--no-windows", action="store_true", help="skip variants that need window vectors")
    ap.add_argument("--sentences", action="store_true",
                    help="also dense MaxP over overlapping pairs of sentences (one vector per pair)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    model = LocalMiniLMEmbedding()
    paul_graham_coverage(model)
    names = args.collections.split(",")
    table: Dict[str, Dict[str, Tuple[float, float]]] = {}
    for name in names:
        ids, texts, queries, qrels = load_collection(name)
        qids = list(queries)
        qv = cached_embeddings(model, [queries[q] for q in qids], f"{name}_queries")
        first = cached_embeddings(model, texts, f"{name}_corpus")
        row = {d: i for i, d in enumerate(ids)}
        one = [first[i : i + 1] for i in range(len(texts))]
        dfirst = dense_lists(ids, qv, one, "first")
        sparse = bm25_lists(name, ids, texts, queries)
        variants: Dict[str, Callable[[int, str], List[str]]] = {}

        def base(i: int, q: str) -> List[str]:
            return [d for d, _ in weighted([dfirst[i], sparse[q]], [0.5, 0.5])]

        variants["base: hybrid weighted 0.5 (default)"] = base
        variants["zscore fusion 0.5"] = lambda i, q: [d for d, _ in zscore_fuse([dfirst[i], sparse[q]], [0.5, 0.5])]
        variants["rrf k=60 depth 100"] = lambda i, q: [d for d, _ in fusion.rrf([dfirst[i], sparse[q]], k=60)]

        def conf(i: int, q: str) -> List[str]:
            cd, cs = confidence(dfirst[i]), confidence(sparse[q])
            wd = cd / (cd + cs) if cd + cs > 0 else 0.5
            return [d for d, _ in weighted([dfirst[i], sparse[q]], [wd, 1 - wd])]

        variants["conf: per-query weights"] = conf

        def dprf(k: int, beta: float) -> Callable[[int, str], List[str]]:
            def run(i: int, q: str) -> List[str]:
                top = base(i, q)[:k]
                v = qv[i] + beta * first[[row[d] for d in top]].mean(axis=0)
                v = v / np.linalg.norm(v)
                s = first @ v
                o = np.argsort(-s)[:DEPTH]
                d2 = [(ids[j], float(s[j])) for j in o]
                return [d for d, _ in weighted([d2, sparse[q]], [0.5, 0.5])]
            return run

        def dprf_with(i: int, q: str, sp: Dict[str, Ranked], k: int = 3, beta: float = 0.5) -> List[str]:
            top = base(i, q)[:k]
            v = qv[i] + beta * first[[row[d] for d in top]].mean(axis=0)
            s = first @ (v / np.linalg.norm(v))
            d2 = [(ids[j], float(s[j])) for j in np.argsort(-s)[:DEPTH]]
            return [d for d, _ in weighted([d2, sp[q]], [0.5, 0.5])]

        for k, beta in ((3, 0.5), (3, 1.0), (5, 0.5)):
            variants[f"dprf k={k} beta={beta}"] = dprf(k, beta)

        df: Dict[str, int] = {}
        for t in texts:
            for w in set(TOKEN.findall(t.lower())):
                df[w] = df.get(w, 0) + 1
        def dprf_list(i: int, q: str, k: int = 3, beta: float = 0.5) -> Ranked:
            top = base(i, q)[:k]
            v = qv[i] + beta * first[[row[d] for d in top]].mean(axis=0)
            s = first @ (v / np.linalg.norm(v))
            return [(ids[j], float(s[j])) for j in np.argsort(-s)[:DEPTH]]

        variants["dprf interp: first .25 + dprf .25 + bm25 .5"] = \
            lambda i, q: [d for d, _ in weighted([dfirst[i], dprf_list(i, q), sparse[q]], [0.25, 0.25, 0.5])]
        for k, n, rep in ((3, 10, 2), (5, 20, 2), (3, 5, 3)):
            expanded = {}
            for i, q in enumerate(qids):
                terms = expansion_terms(queries[q], [texts[row[d]] for d in base(i, q)[:k]], df, len(texts), n)
                expanded[q] = " ".join([queries[q]] * rep + terms)
            sp2 = bm25_lists(name, ids, texts, expanded)
            tag = f"lprf k={k} n={n} q x{rep}"
            variants[tag] = (lambda sp2: lambda i, q: [d for d, _ in weighted(
                [dfirst[i], sp2[q]], [0.5, 0.5])])(sp2)
            variants[f"{tag} + dprf k=3 beta=0.5"] = (lambda sp2: lambda i, q: dprf_with(i, q, sp2))(sp2)
            variants[f"{tag} interp: 4 lists .25"] = (lambda sp2: lambda i, q: [d for d, _ in weighted(
                [dfirst[i], dprf_list(i, q), sparse[q], sp2[q]], [0.25, 0.25, 0.25, 0.25])])(sp2)

        if args.bm25_grid:
            for k1 in (0.9, 1.2, 1.5):
                for b in (0.4, 0.75, 0.9):
                    if (k1, b) == (1.2, 0.75):
                        continue
                    sp = bm25_lists(name, ids, texts, queries, k1=k1, b=b)
                    variants[f"bm25 k1={k1} b={b} hybrid"] = (
                        lambda sp: lambda i, q: [d for d, _ in weighted([dfirst[i], sp[q]], [0.5, 0.5])])(sp)
                    variants[f"bm25 k1={k1} b={b} alone"] = (lambda sp: lambda i, q: [d for d, _ in sp[q]])(sp)

        if not args.no_windows:
            windows = window_vectors(model, name, window_texts(model, texts), first)
            dmax = dense_lists(ids, qv, windows, "maxp")
            variants["s2b: children MaxP + BM25 parent"] = \
                lambda i, q: [d for d, _ in weighted([dmax[i], sparse[q]], [0.5, 0.5])]
            variants["3way: first + MaxP + BM25 .25/.25/.5"] = \
                lambda i, q: [d for d, _ in weighted([dfirst[i], dmax[i], sparse[q]], [0.25, 0.25, 0.5])]

        if args.sentences:
            pairs = [sentence_pairs(t) for t in texts]
            flat = cached_embeddings(model, [p for ps in pairs for p in ps], f"{name}_sentence_pairs")
            cut = np.cumsum([len(ps) for ps in pairs])[:-1]
            spairs = dense_lists(ids, qv, np.split(flat, cut), "maxp")
            print(f"{name}: {len(flat)} sentence-pair vectors ({len(flat) / len(texts):.1f} per text)")
            variants["sent: sentence-pair MaxP + BM25 .5/.5"] = \
                lambda i, q: [d for d, _ in weighted([spairs[i], sparse[q]], [0.5, 0.5])]
            variants["sent 3way: first + sentence-pair MaxP + BM25 .25/.25/.5"] = \
                lambda i, q: [d for d, _ in weighted([dfirst[i], spairs[i], sparse[q]], [0.25, 0.25, 0.5])]

        if args.library:
            for label, lib in library_runs(model, name, ids, texts, first, qids, queries, qv).items():
                variants[label] = (lambda lib: lambda i, q: lib[q])(lib)

        print(f"\n{name}: {len(ids)} texts, {len(qids)} queries")
        base_pq: Optional[np.ndarray] = None
        for label, fn in variants.items():
            pq = per_query({q: fn(i, q) for i, q in enumerate(qids)}, qrels)
            base_pq = pq if base_pq is None else base_pq
            table.setdefault(label, {})[name] = (float(pq[:, 0].mean()), float(pq[:, 1].mean()))
            print(f"  {label:42s} nDCG@10 {table[label][name][0]:.3f}  hit@5 {table[label][name][1]:.3f}   vs base: "
                  f"nDCG {paired(base_pq[:, 0], pq[:, 0])}  hit@5 {paired(base_pq[:, 1], pq[:, 1])}", flush=True)
    print(f"\n{'variant':42s} " + " ".join(f"{n:>16s}" for n in names) + "   mean")
    for label, cells in table.items():
        got = [n for n in names if n in cells]
        line = " ".join(f"{cells[n][0]:.3f} / {cells[n][1]:.3f}" if n in cells else f"{'-':>15s}" for n in names)
        print(f"{label:42s} {line}   {np.mean([cells[n][0] for n in got]):.3f}")
    (OUT / "fusion_variants.json").write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
