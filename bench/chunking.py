"""Chunking for the dense side: which default lets the embedding model read every chunk whole, at what cost.

Each collection's documents are written as .txt files and ingested through the package's own ``Ingestor`` (real
MiniLM, real Milvus Lite) once per option, side by side in one run:

* ``700/50 (before)``: ``SentenceSplitter(700, 50)`` in the splitter's default tokenizer, one vector per chunk
  (the model reads its first 256 word pieces): the default before chunks were sized to the window;
* ``window (default)``: ``ingest.chunking.build_splitter(model)``: chunks of the model's window (254 word pieces
  of text) with an eighth of overlap, one vector each;
* ``window, overlap 96``: the same chunks sharing 96 word pieces with their neighbours;
* ``700/50 + pooled windows``: the 700/50 chunks, each embedded as the normalised mean of the vectors of windows
  covering it (``embeddings.windows.window_spans``), so one vector per chunk that read all of it.

Per option and collection: nDCG@10 (documents ranked by their best chunk; the retriever's default hybrid, and
dense alone), rows, bytes (text + vectors, and the Milvus Lite file on disk), ingest time, and the share of
chunks longer than the model's window (what one vector per chunk does not read). The machine is shared, so
times are comparable only within one run.

    PYTHONPATH=. python bench/chunking.py [--collections scifact,cranfield] [--queries 100] [--docs 500]
        [--options 0,1,2]
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import fresh_dir, ndcg_at  # noqa: E402
from quality_matrix import load_collection  # noqa: E402

from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.bridge.pydantic import PrivateAttr  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.schema import QueryBundle  # noqa: E402
from pymilvus import MilvusClient  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.embeddings.windows import window_spans  # noqa: E402
from llama_index_convrag.ingest.chunking import build_splitter  # noqa: E402
from llama_index_convrag.ingest.pipeline import Ingestor  # noqa: E402
from llama_index_convrag.milvus.schema import create_collection, default_spec  # noqa: E402
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever  # noqa: E402

log = logging.getLogger("bench.chunking")
#: Chunks retrieved per query before ranking documents by their best chunk.
CHUNK_DEPTH = 40


class PooledWindowEmbedding(BaseEmbedding):
    """Embeds a text as the normalised mean of the vectors of windows covering it; queries as the base model."""

    _base: LocalMiniLMEmbedding = PrivateAttr()

    def __init__(self, base: LocalMiniLMEmbedding) -> None:
        super().__init__(model_name=f"{base.model_name}-pooled-windows", embed_batch_size=base.embed_batch_size)
        self._base = base

    def _pooled(self, texts: List[str]) -> List[List[float]]:
        windows = [[t[a:b] for a, b in window_spans(t, self._base, overlap=0)] for t in texts]
        flat = self._base.embed([w for ws in windows for w in ws])
        out, pos = [], 0
        for ws in windows:
            v = flat[pos : pos + len(ws)].mean(axis=0)
            out.append((v / max(float(np.linalg.norm(v)), 1e-12)).tolist())
            pos += len(ws)
        return out

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._base.get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._pooled([text])[0]

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self._pooled(texts)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._get_query_embedding(query)


Option = Tuple[str, Callable[[LocalMiniLMEmbedding], SentenceSplitter], bool]
OPTIONS: List[Option] = [
    ("700/50 (before)", lambda m: SentenceSplitter(chunk_size=700, chunk_overlap=50), False),
    ("window (default)", lambda m: build_splitter(m), False),
    ("700/50 + pooled windows", lambda m: SentenceSplitter(chunk_size=700, chunk_overlap=50), True),
    ("window, overlap 96", lambda m: build_splitter(m, chunk_overlap=96), False),
]


def subset(name: str, n_queries: Optional[int], n_docs: Optional[int], seed: int = 0):
    """The collection, cut to ``n_queries`` queries and ``n_docs`` documents (all their relevant ones kept)."""
    ids, texts, queries, qrels = load_collection(name)
    if n_queries is not None and n_queries < len(queries):
        keep = sorted(queries)[:n_queries]
        queries = {q: queries[q] for q in keep}
        qrels = {q: qrels[q] for q in keep}
    if n_docs is not None and n_docs < len(ids):
        wanted = {d for rel in qrels.values() for d in rel}
        rest = [d for d in ids if d not in wanted]
        random.Random(seed).shuffle(rest)
        chosen = wanted | set(rest[: max(0, n_docs - len(wanted))])
        pairs = [(d, t) for d, t in zip(ids, texts) if d in chosen]
        ids, texts = [d for d, _ in pairs], [t for _, t in pairs]
    return ids, texts, queries, qrels


def write_files(folder: Path, ids: Sequence[str], texts: Sequence[str]) -> Dict[str, str]:
    """One .txt file per document; file path -> document id."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for i, (d, t) in enumerate(zip(ids, texts)):
        p = folder / f"{i:06d}.txt"
        p.write_text(t, encoding="utf-8")
        paths[p.resolve().as_posix()] = d
    return paths


def ranked_docs(retriever: MilvusHybridRetriever, query: str, vector: List[float], doc_of: Dict[str, str]
                ) -> List[str]:
    out: List[str] = []
    for n in retriever.retrieve(QueryBundle(query, embedding=vector)):
        d = doc_of[n.node.ref_doc_id]
        if d not in out:
            out.append(d)
    return out


def run_option(label: str, splitter: SentenceSplitter, pooled: bool, model: LocalMiniLMEmbedding, folder: Path,
               doc_of: Dict[str, str], queries: Dict[str, str], qvecs: Dict[str, List[float]],
               qrels: Dict[str, Dict[str, int]], work: Path) -> Dict[str, Any]:
    db = work / "c.db"
    client = MilvusClient(str(db))
    create_collection(client, "c", default_spec(384))
    from llama_index_convrag.milvus.schema import detect_spec

    embed = PooledWindowEmbedding(model) if pooled else model
    ingestor = Ingestor(client=client, collection_name="c", spec=detect_spec(client, "c"), embed_model=embed,
                        splitter=splitter)
    t0 = time.perf_counter()
    report = ingestor.run(folder)
    ingest_s = time.perf_counter() - t0
    rows = client.query("c", filter='id != ""', output_fields=["text"], limit=16384)
    texts = [r["text"] for r in rows]
    counts = model.count_tokens(texts)
    over = sum(1 for n in counts if n > model.max_input_tokens)
    result: Dict[str, Any] = {"option": label, "rows": len(rows), "ingest_s": ingest_s,
                              "text_mb": sum(len(t.encode("utf-8")) for t in texts) / 1e6,
                              "vector_mb": len(rows) * 384 * 4 / 1e6,
                              "over_window": 0.0 if pooled else over / max(len(rows), 1),
                              "over_window_one_vector": over / max(len(rows), 1)}
    for mode in ("hybrid", "dense"):
        r = MilvusHybridRetriever.from_defaults(collection_name="c", client=client, embed_model=model,
                                                search_type=mode, similarity_top_k=CHUNK_DEPTH)
        per_query = [ndcg_at(ranked_docs(r, queries[q], qvecs[q], doc_of), qrels[q]) for q in queries]
        result[f"per_query_{mode}"] = per_query
        result[f"ndcg_{mode}"] = float(np.mean(per_query))
    client.close()
    result["disk_mb"] = sum(p.stat().st_size for p in work.rglob("*") if p.is_file()) / 1e6
    log.info("%s: %s (report: %d chunks, over_window %d)", label,
             {k: v for k, v in result.items() if not k.startswith("per_query")}, report.chunks, report.over_window)
    return result


def paired_ci(a: Sequence[float], b: Sequence[float], n: int = 2000, seed: int = 0) -> Tuple[float, float, float]:
    """Mean of ``b - a`` over queries and its 95% bootstrap interval (queries resampled)."""
    d = np.asarray(b) - np.asarray(a)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n, len(d)))].mean(axis=1)
    return float(d.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main(argv: Optional[Sequence[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--collections", default="scifact,cranfield")
    p.add_argument("--queries", type=int, default=100, help="queries per collection (SciFact 809, Cranfield 225)")
    p.add_argument("--docs", type=int, default=500,
                   help="documents per collection (SciFact 5,183, Cranfield 1,400; the relevant ones are kept)")
    p.add_argument("--options", default="0,1,2",
                   help="indices into the option list (0 before, 1 window, 2 pooled, 3 window with more overlap)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    model = LocalMiniLMEmbedding()
    chosen = [OPTIONS[int(i)] for i in args.options.split(",")]
    table = []
    for name in args.collections.split(","):
        ids, texts, queries, qrels = subset(name, args.queries, args.docs)
        root = fresh_dir(f"chunking_{name}")
        doc_of = write_files(root / "files", ids, texts)
        qvecs = dict(zip(queries, model.embed(list(queries.values())).tolist()))
        for label, make, pooled in chosen:
            work = root / f"db_{len(table)}"
            work.mkdir()
            res = run_option(label, make(model), pooled, model, root / "files", doc_of, queries, qvecs, qrels, work)
            table.append({"collection": f"{name} ({len(ids)} docs, {len(queries)} queries)", **res})
    print("\nfigures from a shared, loaded 2-core machine: compare times within this run only\n")
    print("| collection | option | nDCG@10 hybrid / dense (paired difference to the first option, 95% CI) | rows | text + vectors MB | Lite file MB | ingest s | "
          "chunks past the window |")
    print("|---|---|---|---|---|---|---|---|")
    base: Dict[str, Dict[str, Any]] = {}
    for r in table:
        first = base.setdefault(r["collection"], r)
        delta = "" if first is r else " (hybrid {:+.3f} [{:+.3f}, {:+.3f}])".format(
            *paired_ci(first["per_query_hybrid"], r["per_query_hybrid"]))
        past = f"{100 * r['over_window']:.1f}%"
        if r["option"].endswith("pooled windows"):
            past += f" (one vector would miss {100 * r['over_window_one_vector']:.1f}%)"
        print(f"| {r['collection']} | {r['option']} | {r['ndcg_hybrid']:.3f} / {r['ndcg_dense']:.3f}{delta} | {r['rows']} | "
              f"{r['text_mb'] + r['vector_mb']:.1f} | {r['disk_mb']:.1f} | {r['ingest_s']:.0f} | {past} |")


if __name__ == "__main__":
    main()
