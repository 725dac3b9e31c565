"""The local model's variants as files: made from the installed ONNX file on first use, cached, never downloaded.

The shipped graph stores int8 weights and computes in fp32: each weight goes through ``Cast`` and ``Mul`` (its
per-channel scale) before its ``MatMul``. :func:`fold_weights` turns those pairs into fp32 weights. The ``fp32``
variant runs that graph with ONNX Runtime's fused kernels (:mod:`~llama_index_convrag.embeddings.fuse`; the same
vectors, :func:`fused_model_path`); the ``int8`` variant quantizes the fused graph's weight ``MatMul``\\ s with ONNX
Runtime's dynamic quantization (int8 weights per output channel, uint8 activations scaled per run), except the layers
:class:`Int8Recipe` keeps in float (:func:`int8_model_path`). Both are cached in the user's cache folder
(``platformdirs``), keyed by the source file's hash, the ONNX Runtime version and the rewrite (fusion version, recipe),
written to a temporary file and renamed into place, so concurrent first uses never read a half-written file.
Converting needs the ``onnx`` package (the ``local`` extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from llama_index_convrag._files import sha256_file
from llama_index_convrag.errors import ConfigurationError, PathNotFoundError

#: The transformer layers of all-MiniLM-L6-v2 and the six weight ``MatMul``\ s of each, in graph order.
NUM_LAYERS = 6
ROLES = ("query", "key", "value", "attention_out", "ffn_in", "ffn_out")
#: Every weight ``MatMul`` by name: ``layer<i>.<role>``.
LAYER_NAMES = tuple(f"layer{i}.{role}" for i in range(NUM_LAYERS) for role in ROLES)
CACHE_APP = "llama-index-convrag"


@dataclass(frozen=True)
class Int8Recipe:
    """How the int8 variant is made: which weight ``MatMul``\\ s stay in float, and the quantizer's options.

    ``keep_float`` names layers as ``layer<i>.<role>`` (:data:`LAYER_NAMES`). ``per_channel``: one weight scale per
    output channel (the shipped weights are scaled so, so requantizing them is exact); ``reduce_range``: 7-bit
    weights (for CPUs without VNNI whose 8-bit products can saturate).
    """

    keep_float: Tuple[str, ...] = ()
    per_channel: bool = True
    reduce_range: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.keep_float) - set(LAYER_NAMES))
        if unknown:
            raise ConfigurationError(f"keep_float names unknown layers {unknown}; layers are {list(LAYER_NAMES)}")
        if not isinstance(self.per_channel, bool) or not isinstance(self.reduce_range, bool):
            raise ConfigurationError(f"per_channel and reduce_range must be bools, got {self.per_channel!r} and "
                                     f"{self.reduce_range!r}")
        object.__setattr__(self, "keep_float", tuple(sorted(set(self.keep_float), key=LAYER_NAMES.index)))

    def key(self) -> str:
        """A short stable hash of the recipe (part of the cache key and of the variant's name)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]


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


def quantize_model(source: Path, dest: Path, recipe: Int8Recipe) -> None:
    """Write the int8 variant of ``source`` to ``dest``: its fused graph with the weight ``MatMul``\\ s quantized
    (not atomic: :func:`int8_model_path` renames it in place)."""
    onnx = import_onnx()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from llama_index_convrag.embeddings.fuse import fused_model

    model = fused_model(onnx.load(str(source)))
    layers = weight_matmuls(model)
    quantize_dynamic(model, str(dest), op_types_to_quantize=["MatMul"], per_channel=recipe.per_channel,
                     reduce_range=recipe.reduce_range, weight_type=QuantType.QInt8,
                     nodes_to_exclude=[layers[name] for name in recipe.keep_float])


def fuse_model(source: Path, dest: Path) -> None:
    """Write the fused fp32 graph of ``source`` to ``dest`` (not atomic: :func:`fused_model_path` renames it)."""
    onnx = import_onnx()
    from llama_index_convrag.embeddings.fuse import fused_model

    onnx.save(fused_model(onnx.load(str(source))), str(dest))


def default_cache_dir() -> Path:
    """``<user cache>/llama-index-convrag/models`` (``platformdirs``); ``CONVRAG_CACHE_DIR`` overrides the root."""
    root = os.environ.get("CONVRAG_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "models"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir(CACHE_APP)) / "models"


def cache_key(source: Path, recipe: Int8Recipe) -> str:
    """Source file hash + ONNX Runtime version + fusion version + recipe: a new model file, runtime, rewrite or recipe
    converts again."""
    return f"{_source_key(source)}-{recipe.key()}"


def _source_key(source: Path) -> str:
    import onnxruntime

    from llama_index_convrag.embeddings.fuse import FUSION_VERSION

    return f"{sha256_file(source)[:16]}-ort{onnxruntime.__version__}-fuse{FUSION_VERSION}"


def _cached(source: Path, name: str, make: Callable[[Path], None], cache_dir: Optional[Path]) -> Path:
    """``<cache>/<name>``, made by ``make(temporary path)`` when missing and renamed into place."""
    if not source.is_file():
        raise PathNotFoundError(f"ONNX model file not found: {str(source)!r}")
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    path = folder / name
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.stem}.", suffix=".tmp")
    os.close(fd)
    try:
        make(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def int8_model_path(source: Path, recipe: Int8Recipe, cache_dir: Optional[Path] = None) -> Path:
    """The cached int8 variant of ``source``, made now when missing (a few seconds, once per cache key)."""
    return _cached(source, f"minilm-int8-{cache_key(source, recipe)}.onnx",
                   lambda tmp: quantize_model(source, tmp, recipe), cache_dir)


def fused_model_path(source: Path, cache_dir: Optional[Path] = None) -> Path:
    """The cached fused fp32 graph of ``source``, made now when missing (a few seconds, once per cache key)."""
    return _cached(source, f"minilm-fp32-fused-{_source_key(source)}.onnx", lambda tmp: fuse_model(source, tmp),
                   cache_dir)


def cached_variants(cache_dir: Optional[Path] = None) -> List[Path]:
    """The converted files in the cache, fused fp32 and int8 (to show or remove them)."""
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    return sorted(folder.glob("minilm-*.onnx")) if folder.is_dir() else []
