"""Rerank quality on SciFact train: dense first stage from Milvus Lite, then each offline postprocessor.

Run: ``PYTHONPATH=. python bench/rerank_quality.py [--quick]``. Corpus embeddings are cached under ``bench/out/``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

HERE = Path(__file__).resolve()
OUT = HERE.parent / "out"
log = logging.getLogger("bench.rerank_quality")


def find_scifact() -> Path:
    for parent in HERE.parents:
        candidate = parent / "shared" / "data" / "scifact"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("shared/data/scifact not found in any parent folder of this script")


def load_scifact(root: Path) -> Tuple[List[str], List[str], Dict[str, str], Dict[str, Dict[str, int]]]:
    """(doc ids, doc texts = title + newline + text, queries {id: text}, qrels {qid: {doc_id: rel}})."""
    ids, texts = [], []
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            ids.append(str(doc["_id"]))
            texts.append(f"{doc['title']}\n{doc['text']}")
    queries = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[str(q["_id"])] = q["text"]
    qrels: Dict[str, Dict[str, int]] = {}
    with open(root / "qrels" / "train.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, rel = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(rel)
    queries = {q: t for q, t in queries.items() if q in qrels}
    return ids, texts, queries, qrels


def cached_corpus_embeddings(embed_model, ids: Sequence[str], texts: Sequence[str]) -> np.ndarray:
    """Whole-corpus embeddings, computed once and cached in bench/out/ (keyed by the doc ids)."""
    OUT.mkdir(parents=True, exist_ok=True)
    path, id_path = OUT / "scifact_minilm.npy", OUT / "scifact_minilm_ids.json"
    if path.is_file() and id_path.is_file() and json.loads(id_path.read_text()) == list(ids):
        return np.load(path)
    start = time.perf_counter()
    vectors = np.zeros((len(texts), 384), dtype=np.float32)
    step = 256
    for i in range(0, len(texts), step):
        vectors[i : i + step] = embed_model.embed(texts[i : i + step])
        log.info("embedded %d/%d docs (%.0f s)", min(i + step, len(texts)), len(texts), time.perf_counter() - start)
    np.save(path, vectors)
    id_path.write_text(json.dumps(list(ids)))
    return vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a subset of queries and their candidate pool")
    parser.add_argument("--embed-only", action="store_true", help="only build the corpus embedding cache")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding

    ids, texts, queries, qrels = load_scifact(find_scifact())
    embed_model = LocalMiniLMEmbedding()
    cached_corpus_embeddings(embed_model, ids, texts)
    if args.embed_only:
        return


if __name__ == "__main__":
    main()
