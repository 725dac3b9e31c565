"""A study for ``embedding_fidelity.py --recipe-probe SPEC ...``: how far each int8 recipe moves the vectors from fp32
and how much CPU time it takes, on text of our own (no evaluation set), to choose a recipe before any nDCG is seen.

A spec is ``KEEP[:WEIGHTS[:ACTIVATIONS[:reduce]]]``: ``KEEP`` the layers kept in float (``layer<i>.<role>``,
comma-separated, ``-`` for none, or ``ffn_out<=N``/``ffn<=N``/``all<=N`` for layers 0..N's second / both
feed-forward / all weight products), ``WEIGHTS`` ``int8`` or ``uint8``, ``ACTIVATIONS`` ``dynamic`` or ``static``, ``reduce`` for 7-bit
weights. Each copy is made as the package makes its int8 file (``Int8Recipe``, calibrated on
``embeddings/calibration.txt`` when static) and embeds two probes: window-sized chunks of this repository's docs/
and the package's own docstrings. Static copies embed in batches as fp32 does; dynamic ones one text per run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, List, Tuple

import numpy as np


def parse_spec(spec: str) -> Any:
    """The ``Int8Recipe`` a spec names (see the module docstring)."""
    from llama_index_convrag.embeddings.quantize import LAYER_NAMES, NUM_LAYERS, ROLES, Int8Recipe

    keep, weights, activations, reduce = (spec.split(":") + ["int8", "dynamic", ""])[:4]
    names: List[str] = []
    for part in (p for p in keep.split(",") if p and p != "-"):
        if "<=" in part:
            roles, last = part.split("<=")
            chosen = {"ffn_out": ("ffn_out",), "ffn": ("ffn_in", "ffn_out"), "all": ROLES}[roles]
            names += [f"layer{i}.{r}" for i in range(min(int(last), NUM_LAYERS - 1) + 1) for r in chosen]
        else:
            names.append(part)
    assert set(names) <= set(LAYER_NAMES), f"unknown layers in {spec!r}"
    return Int8Recipe(keep_float=tuple(names), weights=weights, activations=activations,
                      reduce_range=reduce == "reduce")


def spec_model(spec: str) -> Tuple[str, Any]:
    """``(spec, model)``: the local model running the int8 copy ``spec`` names (static copies at ONNX Runtime's
    extended level, where their QDQ pairs become int8 kernels)."""
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding, default_model_path
    from llama_index_convrag.embeddings.model_files import int8_model_path

    recipe = parse_spec(spec)
    level = "ORT_ENABLE_EXTENDED" if recipe.activations == "static" else None
    return spec, LocalMiniLMEmbedding(model_path=str(int8_model_path(default_model_path(), recipe)),
                                      graph_optimization=level, query_cache_size=0)


def docstring_probe(n: int) -> List[str]:
    """Up to ``n`` docstrings of the package's modules, functions and classes (seeded sample), 200+ characters."""
    import ast

    root = Path(__file__).resolve().parents[1] / "llama_index_convrag"
    texts: List[str] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= 200:
                    texts.append(" ".join(doc.split()))
    picked = np.random.default_rng(0).choice(len(texts), size=min(n, len(texts)), replace=False)
    return [texts[i] for i in sorted(picked)]


def recipe_probe(specs: List[str], probe_n: int, docs_probe: Any) -> None:
    """Print, per spec, the mean and max 1 - cosine to fp32 on each probe and the CPU seconds of the docs probe."""
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding

    fp32 = LocalMiniLMEmbedding(variant="fp32", query_cache_size=0)
    probes: List[Tuple[str, List[str]]] = [("docs/ chunks", docs_probe(fp32, probe_n)),
                                           ("docstrings", docstring_probe(probe_n))]
    refs = [fp32.embed(texts) for _, texts in probes]
    start = time.process_time()
    fp32.embed(probes[0][1])
    fp32_cpu = time.process_time() - start
    print(f"probes: {', '.join(f'{len(t)} {name}' for name, t in probes)}; fp32 CPU s on the docs probe {fp32_cpu:.2f}")
    print("| recipe | in float | " + " | ".join(f"{name} mean 1 - cos | max" for name, _ in probes)
          + " | CPU s (docs probe) | x fp32 by CPU |\n|---|---|" + "---|---|" * len(probes) + "---|---|")
    for spec in specs:
        recipe = parse_spec(spec)
        static = recipe.activations == "static"
        model = spec_model(spec)[1]

        def embed(texts: List[str]) -> np.ndarray:
            return model.embed(texts) if static else np.concatenate([model.embed([t]) for t in texts])

        embed(probes[0][1][:2])  # session load out of the timing
        cells = []
        cpu = 0.0
        for k, ((_, texts), ref) in enumerate(zip(probes, refs)):
            start = time.process_time()
            err = 1 - (embed(texts) * ref).sum(1)
            if k == 0:
                cpu = time.process_time() - start
            cells.append(f"{err.mean():.6f} | {err.max():.6f}")
        print(f"| {spec} | {len(recipe.keep_float)} | " + " | ".join(cells) + f" | {cpu:.2f} | {fp32_cpu / cpu:.2f} |",
              flush=True)
