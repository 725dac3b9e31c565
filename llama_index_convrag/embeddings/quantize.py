"""The int8-compute variant of the local model's graph, and the weight folding both variants start from.

The shipped graph stores int8 weights and computes in fp32: each weight goes through ``Cast`` and ``Mul`` (its
per-channel scale) before its ``MatMul``. :func:`fold_weights` turns those pairs into fp32 weights;
:func:`quantize_model` quantizes the weight ``MatMul``\\ s of the fused graph
(:mod:`~llama_index_convrag.embeddings.fuse`), except the layers :class:`Int8Recipe` keeps in float, with ONNX
Runtime's dynamic quantization (int8 weights per output channel, uint8 activations scaled per run) or its static
quantization (the same weights; each activation's scale fixed by the range the fp32 graph reaches on
:mod:`~llama_index_convrag.embeddings.calibration`'s text, as ``QuantizeLinear``/``DequantizeLinear`` pairs that ONNX
Runtime's extended graph optimisations turn into int8 kernels). The files are made
and cached by :mod:`~llama_index_convrag.embeddings.model_files`. Converting needs the ``onnx`` package (the ``local``
extra).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

from llama_index_convrag.embeddings import calibration
from llama_index_convrag.errors import ConfigurationError

#: The transformer layers of all-MiniLM-L6-v2 and the six weight ``MatMul``\ s of each, in graph order.
NUM_LAYERS = 6
ROLES = ("query", "key", "value", "attention_out", "ffn_in", "ffn_out")
#: Weight types of the quantized ``MatMul``\ s.
WEIGHT_TYPES = ("int8", "uint8")
#: How activations are scaled: per run (``dynamic``) or once, from calibration text (``static``).
ACTIVATION_MODES = ("dynamic", "static")
#: Every weight ``MatMul`` by name: ``layer<i>.<role>``.
LAYER_NAMES = tuple(f"layer{i}.{role}" for i in range(NUM_LAYERS) for role in ROLES)


@dataclass(frozen=True)
class Int8Recipe:
    """How the int8 variant is made: which weight ``MatMul``\\ s stay in float, and the quantizer's options.

    ``keep_float`` names layers as ``layer<i>.<role>`` (:data:`LAYER_NAMES`). ``per_channel``: one weight scale per
    output channel (the shipped weights are scaled so, so requantizing them is exact); ``reduce_range``: 7-bit
    weights (for CPUs without VNNI whose 8-bit products can saturate); ``weights``: ``"int8"`` (ONNX Runtime's U8S8
    kernels) or ``"uint8"`` (U8U8 kernels, which do not saturate on AVX2 without VNNI); ``activations``:
    ``"dynamic"`` (each run's range) or ``"static"`` (calibrated once: a text's vector does not depend on what it is
    batched with, and the session needs ONNX Runtime's extended optimisations to run int8 kernels).
    """

    keep_float: Tuple[str, ...] = ()
    per_channel: bool = True
    reduce_range: bool = False
    weights: str = "int8"
    activations: str = "dynamic"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.keep_float) - set(LAYER_NAMES))
        if unknown:
            raise ConfigurationError(f"keep_float names unknown layers {unknown}; layers are {list(LAYER_NAMES)}")
        if not isinstance(self.per_channel, bool) or not isinstance(self.reduce_range, bool):
            raise ConfigurationError(f"per_channel and reduce_range must be bools, got {self.per_channel!r} and "
                                     f"{self.reduce_range!r}")
        if self.weights not in WEIGHT_TYPES:
            raise ConfigurationError(f"weights must be one of {list(WEIGHT_TYPES)}, got {self.weights!r}")
        if self.activations not in ACTIVATION_MODES:
            raise ConfigurationError(f"activations must be one of {list(ACTIVATION_MODES)}, got {self.activations!r}")
        object.__setattr__(self, "keep_float", tuple(sorted(set(self.keep_float), key=LAYER_NAMES.index)))

    def key(self) -> str:
        """A short stable hash of the recipe (part of the cache key and of the variant's name); int8 weights and
        dynamic activations hash as before ``weights`` and ``activations`` existed."""
        fields: Dict[str, Any] = asdict(self)
        for name, former in (("weights", "int8"), ("activations", "dynamic")):
            if fields[name] == former:
                del fields[name]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:10]


def import_onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:
        raise ModuleNotFoundError('the int8 variant of the local model is made with the "onnx" package, which is '
                                  'not installed: pip install "llama-index-convrag[local]"', name="onnx") from exc
    return onnx


def fold_weights(model: Any) -> Any:
    """``model`` (an ``onnx.ModelProto``) with every ``Mul(Cast(int8 initializer), scale initializer)`` replaced by
    its fp32 product as an initializer (what ONNX Runtime's constant folding computes at load)."""
    import numpy as np
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    removed, folded = set(), []
    for node in graph.node:
        if node.op_type != "Mul" or len(node.input) != 2:
            continue
        cast = producer.get(node.input[0])
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in inits or node.input[1] not in inits:
            continue
        q = numpy_helper.to_array(inits.pop(cast.input[0])).astype(np.float32)
        scale = numpy_helper.to_array(inits.pop(node.input[1])).astype(np.float32)
        folded.append(numpy_helper.from_array((q * scale).astype(np.float32), node.output[0]))
        removed.update((id(node), id(cast)))
    kept = [n for n in graph.node if id(n) not in removed]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend([*inits.values(), *folded])
    return model


def weight_matmuls(model: Any) -> Dict[str, str]:
    """``layer<i>.<role>`` -> the name of its ``MatMul`` node in ``model`` (folded: weights are initializers).

    The weight ``MatMul``\\ s come in graph order, six per layer (:data:`ROLES`); the feed-forward shapes are checked,
    so another graph is refused rather than quantized with the wrong layers kept in float."""
    inits = {i.name: tuple(i.dims) for i in model.graph.initializer}
    names = [n.name for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in inits]
    shapes = [inits[n.input[1]] for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in inits]
    if len(names) != len(LAYER_NAMES) or any(shapes[i * 6 + 4][1] != 4 * shapes[i * 6 + 4][0]
                                            for i in range(NUM_LAYERS)):
        raise ConfigurationError(f"the ONNX graph is not the 6-layer MiniLM this recipe names: {len(names)} weight "
                                 f"MatMuls (expected {len(LAYER_NAMES)}); pass variant='fp32' for this model file")
    return dict(zip(LAYER_NAMES, names))


def quantize_model(model: Any, dest: Path, recipe: Int8Recipe) -> None:
    """Write ``model`` (the fused graph, an ``onnx.ModelProto``) with its weight ``MatMul``\\ s quantized to ``dest``
    (not atomic: :func:`~llama_index_convrag.embeddings.model_files.int8_model_path` renames it in place)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    layers = weight_matmuls(model)
    if recipe.activations == "static":
        quantize_calibrated(model, dest, recipe, [layers[name] for name in LAYER_NAMES
                                                  if name not in recipe.keep_float])
        return
    quantize_dynamic(model, str(dest), op_types_to_quantize=["MatMul"], per_channel=recipe.per_channel,
                     reduce_range=recipe.reduce_range,
                     weight_type=QuantType.QInt8 if recipe.weights == "int8" else QuantType.QUInt8,
                     nodes_to_exclude=[layers[name] for name in recipe.keep_float])


def quantize_calibrated(model: Any, dest: Path, recipe: Int8Recipe, nodes: List[str]) -> None:
    """Write ``model`` with the ``MatMul`` nodes ``nodes`` statically quantized (QDQ) to ``dest``: weights as
    ``recipe`` says, each node's input scaled by the range (min/max) the fp32 graph reaches on
    :func:`~llama_index_convrag.embeddings.calibration.calibration_texts`. Outputs stay float (the next node, attention,
    GELU or layer norm, reads float), so ONNX Runtime runs each as one ``MatMulIntegerToFloat``; so does every other
    reader of a quantized input (:func:`float_other_readers`: the residual a layer norm adds)."""
    import tempfile

    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    with tempfile.TemporaryDirectory(prefix="convrag-calibrate-") as tmp:
        source = Path(tmp) / "fused.onnx"  # the calibrator reads the model from a file
        import_onnx().save(model, str(source))
        feeds = calibration.CalibrationFeeds(calibration.calibration_inputs(calibration.calibration_texts()))
        quantize_static(str(source), str(dest), feeds,
                        quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"], nodes_to_quantize=nodes,
                        per_channel=recipe.per_channel, reduce_range=recipe.reduce_range,
                        activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8 if recipe.weights == "int8" else QuantType.QUInt8,
                        calibrate_method=CalibrationMethod.MinMax,
                        extra_options={"OpTypesToExcludeOutputQuantization": ["MatMul"]})
    onnx = import_onnx()
    quantized = onnx.load(str(dest))
    float_other_readers(quantized, set(nodes))
    onnx.save(quantized, str(dest))


def float_other_readers(model: Any, quantized: Set[str]) -> int:
    """Point every node of ``model`` not named in ``quantized`` that reads a ``DequantizeLinear(QuantizeLinear(x))``
    at ``x`` itself; return how many inputs moved. ONNX Runtime's QDQ quantizer gives a quantized tensor's other
    readers its dequantized copy too: here the layer norm output each layer's query, key and value read is also the
    residual its next layer norm adds, which would carry the rounding down the whole stack."""
    producer = {out: node for node in model.graph.node for out in node.output}
    moved = 0
    for node in model.graph.node:
        if node.name in quantized:
            continue
        for k, name in enumerate(node.input):
            dq = producer.get(name)
            q = producer.get(dq.input[0]) if dq is not None and dq.op_type == "DequantizeLinear" else None
            if q is not None and q.op_type == "QuantizeLinear":
                node.input[k] = q.input[0]
                moved += 1
    return moved
