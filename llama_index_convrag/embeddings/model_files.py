"""The files the local model's variants run: made from the installed ONNX file on first use, cached, never downloaded.

``fp32`` runs the fused graph (:func:`fused_model_path`: :func:`~llama_index_convrag.embeddings.fuse.fused_model`,
the same vectors as the installed file); ``int8`` its int8-compute copy (:func:`int8_model_path`:
:func:`~llama_index_convrag.embeddings.quantize.quantize_model` on the fused graph). Both are cached in the user's cache
folder (``platformdirs``), keyed by the source file's hash, the ONNX Runtime version, the fusion version and (int8) the
recipe, written to a temporary file and renamed into place, so concurrent first uses never read a half-written file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, List, Optional

from llama_index_convrag._files import sha256_file
from llama_index_convrag.embeddings.fuse import FUSION_VERSION, fused_model
from llama_index_convrag.embeddings.quantize import Int8Recipe, import_onnx, quantize_model
from llama_index_convrag.errors import PathNotFoundError

CACHE_APP = "llama-index-convrag"


def make_int8(source: Path, dest: Path, recipe: Int8Recipe) -> None:
    """Write the int8 variant of ``source`` to ``dest``: its fused graph, quantized by ``recipe``."""
    quantize_model(fused_model(import_onnx().load(str(source))), dest, recipe)


def make_fused(source: Path, dest: Path) -> None:
    """Write the fused fp32 graph of ``source`` to ``dest``."""
    onnx = import_onnx()
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
                   lambda tmp: make_int8(source, tmp, recipe), cache_dir)


def fused_model_path(source: Path, cache_dir: Optional[Path] = None) -> Path:
    """The cached fused fp32 graph of ``source``, made now when missing (a few seconds, once per cache key)."""
    return _cached(source, f"minilm-fp32-fused-{_source_key(source)}.onnx", lambda tmp: make_fused(source, tmp),
                   cache_dir)


def cached_variants(cache_dir: Optional[Path] = None) -> List[Path]:
    """The converted files in the cache, fused fp32 and int8 (to show or remove them)."""
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    return sorted(folder.glob("minilm-*.onnx")) if folder.is_dir() else []
