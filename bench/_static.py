"""A study for ``embedding_fidelity.py --sensitivity --keep-float-activations static``: one static int8 copy with
every weight ``MatMul`` quantized, from which each layer's copy (that layer alone in int8) is cut without calibrating
again.

A static copy's activation scales come from the fp32 graph's ranges on the calibration text, whichever nodes are
quantized, so putting the other layers back in float (:func:`keep_in_float`) gives the copy the recipe would build
with those layers kept, in a graph edit instead of a calibration run per layer.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable


def keep_in_float(quantized: Any, fused: Any, layers: Iterable[str]) -> Any:
    """A copy of ``quantized`` (a static int8 copy of ``fused``, both ``onnx.ModelProto``) whose weight ``MatMul``\\ s
    named in ``layers`` (``layer<i>.<role>``) read their float input and ``fused``'s float weight again."""
    from llama_index_convrag.embeddings.fuse import _prune
    from llama_index_convrag.embeddings.quantize import weight_matmuls

    model = copy.deepcopy(quantized)
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    by_name = {node.name: node for node in graph.node}
    float_weights = {init.name: init for init in fused.graph.initializer}
    fused_nodes = {node.name: node for node in fused.graph.node}
    for name in (weight_matmuls(fused)[layer] for layer in layers):
        node, weight = by_name[name], fused_nodes[name].input[1]
        node.input[0] = producer[producer[node.input[0]].input[0]].input[0]  # MatMul <- DequantizeLinear <- Quantize
        node.input[1] = weight
        if weight not in {init.name for init in graph.initializer}:
            graph.initializer.append(copy.deepcopy(float_weights[weight]))
    _prune(graph, list(graph.node))
    return model
