"""A study for ``embedding_fidelity.py --smoothing``: activation smoothing of the fused graph before int8
quantization, an exact rewrite that moves outliers into weights. Measured worse than quantizing unsmoothed on this
model (docs/results/variants.md), so the package does not use it.

Dynamic quantization scales a ``MatMul``'s input by its range over the whole run, so a few channels of large
magnitude (BERT's layer norms have them) leave the other channels few of the 256 levels. Smoothing (after
SmoothQuant, Xiao et al. 2023) divides input channel ``j`` by ``s_j = max|x_j|^alpha / max|w_j|^(1 - alpha)`` and
multiplies weight row ``j`` by it: the product is unchanged, the input's range flatter, and the weights, quantized per
output channel, take part of the range. Each smoothed input gets one ``Mul`` node (a layer norm's output also feeds
the residual, so the division cannot be folded into it), except the attention output's input, whose division folds
into the value projection's columns and bias. The ranges ``max|x_j|`` come from the fp32 graph run on
:func:`calibration_texts`, text that ships with this package (its own docstrings), never downloaded.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np

from llama_index_convrag.embeddings.local import DEFAULT_TOKENIZER_PATH as TOKENIZER_FILE
from llama_index_convrag.embeddings.quantize import NUM_LAYERS, weight_matmuls

_PACKAGE = Path(__file__).resolve().parents[1] / "llama_index_convrag"
#: The groups smoothed with one scale: the weight MatMuls that read the same input.
GROUPS = (("query", "key", "value"), ("ffn_in",), ("ffn_out",), ("attention_out",))


def calibration_texts(limit: int = 96, min_chars: int = 200) -> List[str]:
    """Up to ``limit`` docstrings of this package's modules, classes and functions of at least ``min_chars``
    characters, in path order: English prose about the package that every install holds."""
    texts: List[str] = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef,
                                                                        ast.AsyncFunctionDef)))]
        for node in nodes:
            doc = ast.get_docstring(node)
            if doc and len(doc) >= min_chars:
                texts.append(" ".join(doc.split()))
    step = max(1, len(texts) // limit)
    return texts[::step][:limit]


def _inputs_of(model: Any) -> Dict[str, str]:
    """``layer<i>.<role>`` -> the name of the tensor its weight MatMul reads."""
    nodes = {n.name: n for n in model.graph.node}
    return {layer: nodes[name].input[0] for layer, name in weight_matmuls(model).items()}


def activation_ranges(model: Any, texts: Sequence[str], max_length: int = 256) -> Dict[str, np.ndarray]:
    """Per weight-MatMul input tensor (by name): the largest magnitude of each channel over ``texts``, each text run
    alone by ONNX Runtime on ``model`` (an ``onnx.ModelProto``, fp32)."""
    import onnx
    import onnxruntime as ort
    from tokenizers import Tokenizer

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    names = sorted(set(_inputs_of(model).values()))
    probe.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(probe.SerializeToString(), sess_options=options,
                                   providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(TOKENIZER_FILE))
    tok.enable_truncation(max_length=max_length)
    tok.no_padding()
    ranges: Dict[str, np.ndarray] = {}
    for text in texts:
        ids = np.array([tok.encode(text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        for name, value in zip(names, session.run(names, feed)):
            peak = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            ranges[name] = peak if name not in ranges else np.maximum(ranges[name], peak)
    return ranges


def smooth_model(model: Any, ranges: Dict[str, np.ndarray], alpha: float) -> Any:
    """``model`` (the fused fp32 graph) with each group of :data:`GROUPS` smoothed by ``alpha`` (see the module
    docstring); the network's outputs are unchanged up to float rounding."""
    from onnx import helper, numpy_helper

    graph = model.graph
    layers = weight_matmuls(model)
    nodes = {n.name: n for n in graph.node}
    inits = {t.name: t for t in graph.initializer}
    weights = {layer: numpy_helper.to_array(inits[nodes[name].input[1]]) for layer, name in layers.items()}
    inserted: Dict[str, Any] = {}  # the first consumer's name -> the Mul node to put before it
    for layer in range(NUM_LAYERS):
        for group in GROUPS:
            names = [f"layer{layer}.{role}" for role in group]
            source = nodes[layers[names[0]]].input[0]
            w_peak = np.max([np.abs(weights[n]).max(axis=1) for n in names], axis=0)
            scale = (np.maximum(ranges[source], 1e-5) ** alpha / np.maximum(w_peak, 1e-5) ** (1 - alpha))
            scale = np.clip(scale, 1e-2, 1e2).astype(np.float32)
            for n in names:
                weights[n] = weights[n] * scale[:, None]
            if group == ("attention_out",):
                value = f"layer{layer}.value"
                weights[value] = weights[value] / scale[None, :]
                packed = inits[f"convrag.layer{layer}.qkv_bias"]
                bias = numpy_helper.to_array(packed).copy()
                width = bias.shape[0] // 3
                bias[2 * width:] /= scale
                packed.CopyFrom(numpy_helper.from_array(bias.astype(np.float32), packed.name))
                continue
            divisor = f"convrag.layer{layer}.{group[0]}.smooth"
            smoothed = f"{source}_smoothed_{layer}_{group[0]}"
            graph.initializer.append(numpy_helper.from_array((1.0 / scale).astype(np.float32), divisor))
            inserted[layers[names[0]]] = helper.make_node("Mul", [source, divisor], [smoothed],
                                                          name=f"convrag_smooth_{layer}_{group[0]}")
            for n in names:
                nodes[layers[n]].input[0] = smoothed
    for layer, name in layers.items():
        inits[nodes[name].input[1]].CopyFrom(numpy_helper.from_array(weights[layer].astype(np.float32),
                                                                    nodes[name].input[1]))
    ordered = []
    for node in graph.node:
        if node.name in inserted:
            ordered.append(inserted[node.name])
        ordered.append(node)
    del graph.node[:]
    graph.node.extend(ordered)
    return model
