"""The files the local model's variants run: made from the installed ONNX file on first use, cached, never downloaded.

``fp32`` runs the fused graph (:func:`fused_model_path`: :func:`~llama_index_convrag.embeddings.fuse.fused_model`,
the same vectors as the installed file); ``int8`` its int8-compute copy (:func:`int8_model_path`:
:func:`~llama_index_convrag.embeddings.quantize.quantize_model` on the fused graph). Both are cached in the user's cache
folder (``platformdirs``), keyed by the source file's hash, the ONNX Runtime version, the fusion version and (int8) the
recipe, written to a temporary file and renamed into place, so concurrent first uses never read a half-written file.
The source file's hash is itself cached there (:func:`source_digest`), keyed by the file's path, size and
modification time, so a process that finds its converted file does not read the 23 MB source again.
"""

from __future__ import annotations

import hashlib
import os
import re
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


def cache_key(source: Path, recipe: Int8Recipe, cache_dir: Optional[Path] = None) -> str:
    """Source file hash + ONNX Runtime version + fusion version + recipe: a new model file, runtime, rewrite or recipe
    converts again."""
    return f"{_source_key(source, cache_dir)}-{recipe.key()}"


def _source_key(source: Path, cache_dir: Optional[Path]) -> str:
    import onnxruntime

    return f"{source_digest(source, cache_dir)[:16]}-ort{onnxruntime.__version__}-fuse{FUSION_VERSION}"


_DIGEST = re.compile(r"[0-9a-f]{64}")


def source_digest(source: Path, cache_dir: Optional[Path] = None) -> str:
    """The SHA-256 of ``source``, read from ``<cache>/sha256-<key>.txt`` when the file's resolved path, size and
    modification time (ns) are those it was computed for, else computed and written there (atomically)."""
    if not source.is_file():
        raise PathNotFoundError(f"ONNX model file not found: {str(source)!r}")
    stat = source.stat()
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    stamp = f"{source.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
    record = folder / f"sha256-{hashlib.sha256(stamp.encode()).hexdigest()[:24]}.txt"
    try:
        known = record.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        known = ""
    if _DIGEST.fullmatch(known):
        return known
    digest = sha256_file(source)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".sha256-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(digest)
        os.replace(tmp, record)
    except OSError:  # a read-only cache still converts; it only hashes again next time
        pass
    return digest


def _cached(name: str, make: Callable[[Path], None], cache_dir: Optional[Path]) -> Path:
    """``<cache>/<name>``, made by ``make(temporary path)`` when missing and renamed into place."""
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
    return _cached(f"minilm-int8-{cache_key(source, recipe, cache_dir)}.onnx",
                   lambda tmp: make_int8(source, tmp, recipe), cache_dir)


def fused_model_path(source: Path, cache_dir: Optional[Path] = None) -> Path:
    """The cached fused fp32 graph of ``source``, made now when missing (a few seconds, once per cache key)."""
    return _cached(f"minilm-fp32-fused-{_source_key(source, cache_dir)}.onnx", lambda tmp: make_fused(source, tmp),
                   cache_dir)


def cached_variants(cache_dir: Optional[Path] = None) -> List[Path]:
    """The converted files in the cache, fused fp32 and int8 (to show or remove them)."""
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    return sorted(folder.glob("minilm-*.onnx")) if folder.is_dir() else []
