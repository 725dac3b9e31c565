"""Which dense coverage and which fusion should be the default: a matrix over three collections.

For SciFact train (5,183 abstracts, 809 claims), Cranfield (1,400 abstracts, 225 queries) and the CAsT 2021 gold
passages (manual rewrites as queries), on cached MiniLM vectors:

* dense coverage: ``first`` (the chunk truncated to the model's window: what one vector per chunk sees),
  ``maxp`` (windows covering the whole text, score = best window; Dai & Callan 2019) and ``mean`` (one vector per
  text: the normalised mean of its window vectors);
* fusion with BM25 (Milvus Lite, english analyzer, top-100 per query): RRF k=60 over depth 10 (the library's default
  before this change), and per-query min-max weighted fusion over depth 100 with dense weight 0.3 ... 0.7.

Dense lists are exact cosine top-100 in numpy (what FLAT returns); fusion uses ``retrievers.fusion`` (the
retriever's own code). Prints nDCG@10 and hit@5 per collection and the mean over collections.

    PYTHONPATH=. python bench/quality_matrix.py [--collections scifact,cranfield,cast]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, cached_embeddings, fresh_dir, load_scifact, ndcg_at, shared_data  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.embeddings.windows import window_spans  # noqa: E402
from llama_index_convrag.retrievers import fusion  # noqa: E402

log = logging.getLogger("bench.quality_matrix")
DEPTH = 100
WINDOW_OVERLAP = 64
Collection = Tuple[List[str], List[str], Dict[str, str], Dict[str, Dict[str, int]]]


def load_collection(name: str) -> Collection:
    """(doc_ids, texts, queries, qrels) with positive judgments only."""
    from llama_index_convrag.evaluation.datasets import cast_passage_corpus, load_beir, load_cast_turns

    if name == "scifact":
        return load_scifact()
    if name == "cranfield":
        ds = load_beir(shared_data() / "cranfield")
        qrels = {q: {d: r for d, r in rel.items() if r > 0} for q, rel in ds.qrels.items()}
        qrels = {q: r for q, r in qrels.items() if r and q in ds.queries}
        ids = list(ds.corpus)
        return ids, [ds.corpus[d].full_text for d in ids], {q: ds.queries[q].text for q in qrels}, qrels
    if name == "cast":
        dialogues = load_cast_turns(shared_data() / "trec_cast" / "turns.jsonl", years=[2021])
        corpus = cast_passage_corpus(dialogues)
        ids = list(corpus)
        queries, qrels = {}, {}
        for d in dialogues:
            for t in d.turns:
                rel = {k: v for k, v in t.relevant.items() if k in corpus}
                if rel and t.rewrite:
                    queries[t.turn_id], qrels[t.turn_id] = t.rewrite, rel
        return ids, [corpus[d].full_text for d in ids], queries, qrels
    raise ValueError(f"collection must be one of ['cast', 'cranfield', 'scifact'], got {name!r}")


def window_texts(model: LocalMiniLMEmbedding, texts: Sequence[str]) -> List[List[str]]:
    return [[t[a:b] for a, b in window_spans(t, model, WINDOW_OVERLAP)] for t in texts]


def window_vectors(model: LocalMiniLMEmbedding, name: str, wtexts: List[List[str]], first: np.ndarray
                   ) -> List[np.ndarray]:
    """Per text, the vectors of windows covering it (window 0 is the truncated text, i.e. ``first``)."""
    spans = wtexts
    extra = [w for ws in wtexts for w in ws[1:]]
    log.info("%s: %d texts, %d extra windows", name, len(wtexts), len(extra))
    ev = cached_embeddings(model, extra, f"{name}_windows{WINDOW_OVERLAP}") if extra else np.zeros((0, 384))
    out, pos = [], 0
    for i, sp in enumerate(spans):
        out.append(np.vstack([first[i : i + 1], ev[pos : pos + len(sp) - 1]]))
        pos += len(sp) - 1
    return out


def bm25_window_lists(name: str, ids: Sequence[str], wtexts: List[List[str]], queries: Dict[str, str]
                      ) -> Dict[str, List[Tuple[str, float]]]:
    """BM25 over the windows (small-to-big children); a text's score is its best window's (top-DEPTH texts)."""
    wids = [f"{i}:{j}" for i, ws in enumerate(wtexts) for j in range(len(ws))]
    flat = [w for ws in wtexts for w in ws]
    raw = bm25_lists(f"{name}_windows", wids, flat, queries, depth=3 * DEPTH)
    out = {}
    for q, hits in raw.items():
        seen: Dict[str, float] = {}
        for wid, score in hits:
            seen.setdefault(ids[int(wid.split(":")[0])], score)
        out[q] = list(seen.items())[:DEPTH]
    return out


def bm25_lists(name: str, ids: Sequence[str], texts: Sequence[str], queries: Dict[str, str], depth: int = DEPTH,
               *, k1: float = 1.2, b: float = 0.75) -> Dict[str, List[Tuple[str, float]]]:
    """BM25 top-``depth`` per query from Milvus Lite (english analyzer, index params ``k1`` / ``b``), cached as JSON."""
    from pymilvus import MilvusClient

    from llama_index_convrag.milvus.schema import create_collection, default_spec

    key = json.dumps([list(ids), list(texts), sorted(queries.items()), depth, k1, b])
    path = OUT / f"bm25_{name}_{hashlib.sha1(key.encode()).hexdigest()[:12]}.json"
    if path.is_file():
        return json.loads(path.read_text())
    db = fresh_dir(f"bm25_{name}_{k1}_{b}_milvus")
    client = MilvusClient(str(db / "bm25.db"))
    create_collection(client, "c", default_spec(2), bm25_k1=k1, bm25_b=b)
    rows = [{"id": d, "doc_id": d, "text": t, "embedding": [1.0, 0.0], "metadata": {}} for d, t in zip(ids, texts)]
    for i in range(0, len(rows), 500):
        client.insert("c", rows[i : i + 500])
    params = {"metric_type": "BM25", "params": {"drop_ratio_search": 0.0}}
    out = {}
    for qid, q in queries.items():
        hits = client.search("c", data=[q], anns_field="sparse_embedding", limit=depth, search_params=params)[0]
        out[qid] = [(str(h["id"]), float(h["distance"])) for h in hits]
    client.close()
    shutil.rmtree(db, ignore_errors=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.rename(path)
    return out


def dense_lists(ids: Sequence[str], qv: np.ndarray, windows: List[np.ndarray], mode: str
                ) -> List[List[Tuple[str, float]]]:
    if mode == "first":
        doc = np.vstack([w[0] for w in windows])
        scores = qv @ doc.T
    elif mode == "mean":
        doc = np.vstack([w.mean(axis=0) for w in windows])
        doc /= np.linalg.norm(doc, axis=1, keepdims=True)
        scores = qv @ doc.T
    elif mode == "maxp":
        flat = np.vstack(windows)
        owner = np.repeat(np.arange(len(windows)), [len(w) for w in windows])
        s = qv @ flat.T
        scores = np.full((len(qv), len(windows)), -np.inf, dtype=np.float32)
        for j in range(s.shape[1]):  # max over each text's windows
            np.maximum(scores[:, owner[j]], s[:, j], out=scores[:, owner[j]])
    else:
        raise ValueError(mode)
    top = np.argsort(-scores, axis=1)[:, :DEPTH]
    return [[(ids[j], float(scores[i, j])) for j in row] for i, row in enumerate(top)]


def hit_at(run: Sequence[str], rels: Dict[str, int], k: int = 5) -> float:
    return float(any(rels.get(d, 0) > 0 for d in run[:k]))


def systems(dense: List[Tuple[str, float]], sparse: List[Tuple[str, float]]) -> Dict[str, List[str]]:
    out = {"dense": [d for d, _ in dense], "bm25": [d for d, _ in sparse],
           "rrf k=60 depth 10": [d for d, _ in fusion.rrf([dense[:10], sparse[:10]], k=60)]}
    for w in (0.3, 0.4, 0.5, 0.6, 0.7):
        out[f"weighted dense {w:.1f} depth 100"] = [d for d, _ in fusion.weighted([dense, sparse], [w, 1 - w])]
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collections", default="cranfield,cast,scifact")
    ap.add_argument("--modes", default="first,maxp,mean,maxp+bm25 windows",
                    help="dense coverage variants (first needs no window vectors)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    model = LocalMiniLMEmbedding()
    table: Dict[str, Dict[str, Tuple[float, float]]] = {}
    names = args.collections.split(",")
    for name in names:
        ids, texts, queries, qrels = load_collection(name)
        qids = list(queries)
        qv = cached_embeddings(model, [queries[q] for q in qids], f"{name}_queries")
        first = cached_embeddings(model, texts, f"{name}_corpus")
        modes = args.modes.split(",")
        wtexts = window_texts(model, texts)
        if modes == ["first"]:
            windows = [first[i : i + 1] for i in range(len(texts))]
        else:
            windows = window_vectors(model, name, wtexts, first)
        sparse = bm25_lists(name, ids, texts, queries)
        sparse_w = bm25_window_lists(name, ids, wtexts, queries) if "maxp+bm25 windows" in modes else {}
        long_share = float(np.mean([len(w) > 1 for w in windows]))
        print(f"\n{name}: {len(ids)} texts ({long_share:.0%} longer than the window), {len(qids)} queries")
        for mode in modes:
            dl = dense_lists(ids, qv, windows, mode.split("+")[0])
            sp = sparse_w if "bm25 windows" in mode else sparse
            scores: Dict[str, List[Tuple[float, float]]] = {}
            for i, q in enumerate(qids):
                for sys_name, run in systems(dl[i], sp[q]).items():
                    scores.setdefault(sys_name, []).append((ndcg_at(run, qrels[q], 10), hit_at(run, qrels[q])))
            for sys_name, vals in scores.items():
                if sys_name == "bm25" and mode in ("maxp", "mean"):
                    continue
                if sys_name == "dense" and "+" in mode:
                    continue
                key = f"{mode:5s} {sys_name}"
                arr = np.asarray(vals)
                table.setdefault(key, {})[name] = (float(arr[:, 0].mean()), float(arr[:, 1].mean()))
    print(f"\n{'dense / system':40s} " + " ".join(f"{n + ' nDCG@10 hit@5':>26s}" for n in names) + "   mean nDCG")
    for key, row in table.items():
        cells = " ".join(f"{row[n][0]:18.3f} {row[n][1]:7.3f}" for n in names)
        print(f"{key:40s} {cells}   {np.mean([row[n][0] for n in names]):.3f}")
    (OUT / "quality_matrix.json").write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
