"""The local model's graph with ONNX Runtime's fused CPU kernels: the same network, fewer and faster nodes.

The installed graph (exported from PyTorch) spells each layer's attention as some 25 nodes: reshapes, transposes, a
scale on both query and key, the mask added to the scores, ``Softmax`` and an ``IsNaN``/``Where`` guard. ONNX
Runtime's BERT optimizer (``onnxruntime.transformers``) fuses the layer norms and GELUs of this graph but does not
recognise that attention, so :func:`fuse_attention` replaces each layer's with one ``com.microsoft``
``MultiHeadAttention`` node (query, key and value before their bias, the three biases packed, the padding mask as a
key mask) and drops what no longer feeds the output. :func:`fused_model` does the whole rewrite on the folded graph;
:func:`check_fused` refuses a graph the rewrite did not fully recognise.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List

from llama_index_convrag.embeddings.quantize import NUM_LAYERS, fold_weights, weight_matmuls
from llama_index_convrag.errors import ConfigurationError

#: all-MiniLM-L6-v2's attention heads and hidden size.
NUM_HEADS = 12
HIDDEN_SIZE = 384
#: Bumped when the rewrite changes, so cached fused files are made again.
FUSION_VERSION = 1
#: The fused nodes a recognised MiniLM-L6 graph ends with (per layer: one attention, two skip layer norms, one GELU).
EXPECTED_FUSED = {"MultiHeadAttention": NUM_LAYERS, "SkipLayerNormalization": 2 * NUM_LAYERS, "BiasGelu": NUM_LAYERS}
_MASK = "convrag_key_padding_mask"
_BIAS = "inner.encoder.layer.{layer}.attention.self.{role}.bias"


def _bias_adds(graph: Any) -> Dict[str, Any]:
    """Initializer name -> the ``Add`` node that adds it."""
    return {name: node for node in graph.node if node.op_type == "Add" for name in node.input}


def _prune(graph: Any, nodes: List[Any]) -> None:
    """Set ``graph``'s nodes to those of ``nodes`` that feed an output, in topological order; drop unused
    initializers."""
    producer = {out: node for node in nodes for out in node.output}
    keep, seen, stack = set(), set(), [o.name for o in graph.output]
    while stack:
        name = stack.pop()
        if name in seen or name not in producer:
            continue
        seen.add(name)
        keep.add(id(producer[name]))
        stack.extend(x for x in producer[name].input if x)
    ready = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending, ordered = [n for n in nodes if id(n) in keep], []
    while pending:
        rest = []
        for node in pending:
            if all(x in ready for x in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            raise ConfigurationError(f"the rewritten graph has a cycle or a missing input at {rest[0].name!r}")
        pending = rest
    del graph.node[:]
    graph.node.extend(ordered)
    used = {x for node in ordered for x in node.input}
    initializers = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(initializers)


def fuse_attention(model: Any) -> Any:
    """``model`` (folded, an ``onnx.ModelProto``) with each layer's attention as one ``MultiHeadAttention`` node."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    layers = weight_matmuls(model)
    adds = _bias_adds(graph)
    inits = {t.name: t for t in graph.initializer}
    by_name = {node.name: node for node in graph.node}
    new = [helper.make_node("Cast", ["attention_mask"], [_MASK], to=TensorProto.INT32, name="convrag_mask_int32")]
    for layer in range(NUM_LAYERS):
        inputs, biases = [], []
        for role in ("query", "key", "value"):
            bias = _BIAS.format(layer=layer, role=role)
            if bias not in adds or bias not in inits:
                raise ConfigurationError(f"the ONNX graph has no {role} bias {bias!r}; pass a MiniLM-L6 export")
            inputs.append(next(x for x in adds[bias].input if x != bias))
            biases.append(numpy_helper.to_array(inits[bias]))
        packed = f"convrag.layer{layer}.qkv_bias"
        graph.initializer.append(numpy_helper.from_array(np.concatenate(biases).astype(np.float32), packed))
        context = by_name[layers[f"layer{layer}.attention_out"]].input[0]
        new.append(helper.make_node("MultiHeadAttention", [*inputs, packed, _MASK], [context], domain="com.microsoft",
                                    num_heads=NUM_HEADS, name=f"convrag_attention_{layer}"))
    replaced = {node.output[0] for node in new[1:]}
    _prune(graph, [n for n in graph.node if not set(n.output) & replaced] + new)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def check_fused(model: Any) -> None:
    """Raise :class:`ConfigurationError` unless ``model`` holds exactly the fused nodes of :data:`EXPECTED_FUSED`."""
    counts = Counter(node.op_type for node in model.graph.node)
    got = {op: counts.get(op, 0) for op in EXPECTED_FUSED}
    if got != EXPECTED_FUSED:
        raise ConfigurationError(f"fusing the ONNX graph gave {got}, expected {EXPECTED_FUSED}; this graph is not "
                                 "the MiniLM-L6 export the rewrite knows")


def fused_model(model: Any) -> Any:
    """The installed graph (an ``onnx.ModelProto``) folded (:func:`fold_weights`), with ONNX Runtime's BERT fusions
    (skip layer norms, bias + GELU) and our attention fusion; checked by :func:`check_fused`."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_by_fusion

    folded = fold_weights(model)
    weight_matmuls(folded)  # another graph is refused here, before the optimizer runs
    options = FusionOptions("bert")
    options.enable_attention = False  # it does not match this export; fuse_attention does it
    fused = optimize_by_fusion(folded, model_type="bert", num_heads=NUM_HEADS, hidden_size=HIDDEN_SIZE,
                               optimization_options=options).model
    fused = fuse_attention(fused)
    check_fused(fused)
    return fused
