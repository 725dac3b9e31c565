"""Shared bench helpers: locate ../shared/data, load SciFact, cache embeddings, pure nDCG/Recall."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

log = logging.getLogger("bench")
OUT = Path(__file__).resolve().parent / "out"


def fresh_dir(name: str) -> Path:
    """``OUT/name``, emptied (a bench's own Milvus Lite files)."""
    import shutil

    path = OUT / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def shared_data() -> Path:
    for p in Path(__file__).resolve().parents:
        if (p / "shared" / "data").is_dir():
            return p / "shared" / "data"
    raise FileNotFoundError("shared/data not found above bench/")


def load_scifact() -> Tuple[List[str], List[str], Dict[str, str], Dict[str, Dict[str, int]]]:
    """(doc_ids, doc_texts, queries {qid: text}, qrels {qid: {doc_id: rel}}); text = title + "\\n" + text."""
    root = shared_data() / "scifact"
    ids, texts = [], []
    with open(root / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ids.append(str(d["_id"]))
            texts.append(f"{d['title']}\n{d['text']}")
    qrels: Dict[str, Dict[str, int]] = {}
    with open(root / "qrels" / "train.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            q, d, s = line.rstrip("\n").split("\t")
            qrels.setdefault(q, {})[d] = int(s)
    queries: Dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if str(d["_id"]) in qrels:
                queries[str(d["_id"])] = d["text"]
    return ids, texts, queries, qrels


def cached_embeddings(model, texts: Sequence[str], tag: str, batch: int = 64) -> np.ndarray:
    """Embed ``texts`` once; cached as bench/out/emb_<tag>_<model id>_<hash>.npy keyed by the model's
    ``embed_model_id`` (name and variant) + text hash."""
    from llama_index_convrag.embeddings.identity import embed_model_id

    h = hashlib.sha1()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    name = re.sub(r"[^0-9A-Za-z_.-]", "_", embed_model_id(model) or type(model).__name__)  # the variant too
    path = OUT / f"emb_{tag}_{name}_{h.hexdigest()[:12]}.npy"
    if path.is_file():
        return np.load(path)
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    parts = []
    for i in range(0, len(texts), batch):
        parts.append(np.asarray(model.embed(list(texts[i : i + batch])), dtype=np.float32))
        if (i // batch) % 10 == 0:
            log.info("embedded %d/%d (%.0f s)", i + len(parts[-1]), len(texts), time.perf_counter() - t0)
    arr = np.concatenate(parts) if parts else np.zeros((0, 384), dtype=np.float32)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, arr)
    tmp.rename(path)
    return arr


def recipe_model(keep: str, weights: str = "int8", activations: str = "dynamic") -> Tuple[str, object]:
    """``(label, model)``: an int8 copy of the local model keeping ``keep``'s layers in float (``layer<i>.<role>``,
    comma-separated; ``-`` for none), its weights of type ``weights``, its activations ``dynamic`` or ``static``
    (calibrated; run at ONNX Runtime's extended level, where its QDQ pairs become int8 kernels)."""
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding, default_model_path
    from llama_index_convrag.embeddings.model_files import int8_model_path
    from llama_index_convrag.embeddings.quantize import Int8Recipe

    recipe = Int8Recipe(keep_float=tuple(k for k in keep.split(",") if k and k != "-"), weights=weights,
                        activations=activations)
    level = "ORT_ENABLE_EXTENDED" if activations == "static" else None
    label = f"int8 keep {','.join(recipe.keep_float) or '(none)'}, {weights} weights, {activations} activations"
    return label, LocalMiniLMEmbedding(model_path=str(int8_model_path(default_model_path(), recipe)),
                                       graph_optimization=level, query_cache_size=0)


def assert_variant(model, variant: str) -> None:
    """Assert ``model`` is the local model's ``variant`` and runs the graph that names: its weight products in int8
    (``MatMulInteger`` nodes) for int8, none for fp32; fused attention unless an fp32 model has ``fused=False``.
    A bench that times a variant measures that variant."""
    import onnx

    assert model.variant == variant, f"asked for the {variant} variant, got {model.variant}"
    nodes = onnx.load(model.onnx_path).graph.node
    integer = sum(n.op_type == "MatMulInteger" for n in nodes)
    assert (integer > 0) == (variant == "int8"), f"the {variant} variant runs {integer} int8 MatMuls"
    fused = sum(n.op_type == "MultiHeadAttention" for n in nodes)
    assert (fused > 0) == (variant == "int8" or model.fused), f"fused={model.fused} runs {fused} fused attentions"


def ndcg_at(run: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(run[:k]))
    ideal = sorted(rels.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(run: Sequence[str], rels: Mapping[str, int], k: int = 100) -> float:
    rel = {d for d, r in rels.items() if r > 0}
    return len(rel & set(run[:k])) / len(rel) if rel else 0.0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding

    m = LocalMiniLMEmbedding()
    ids, texts, queries, qrels = load_scifact()
    cached_embeddings(m, list(queries.values()), "scifact_queries")
    cached_embeddings(m, texts, "scifact_corpus")
    log.info("done")
