"""The two ``pkg_resources`` names milvus-lite 2.5.1 imports, for environments without setuptools' ``pkg_resources``.

milvus-lite 2.5.1 runs ``from pkg_resources import DistributionNotFound, get_distribution`` on import (to read its
own version). ``pkg_resources`` ships with setuptools, which is absent from Python 3.12+ virtual environments and is
being removed from setuptools itself; pinning setuptools would downgrade it in the user's environment. So when no
``pkg_resources`` can be imported, :func:`ensure_pkg_resources` registers a module with those two names backed by
``importlib.metadata``; a real ``pkg_resources`` is never replaced.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
import types

SHIM_NAME = "pkg_resources"


class _Distribution:
    """What milvus-lite reads from ``get_distribution(name)``: ``.version``."""

    def __init__(self, name: str) -> None:
        self.project_name = name
        self.version = importlib.metadata.version(name)


def _get_distribution(name: str) -> _Distribution:
    return _Distribution(name)


def ensure_pkg_resources() -> bool:
    """Register the shim when ``pkg_resources`` is not importable; True when it did (idempotent)."""
    if sys.modules.get(SHIM_NAME) is not None:
        return False
    try:
        if importlib.util.find_spec(SHIM_NAME) is not None:
            return False
    except (ImportError, ValueError):  # a finder that refuses it, or ``sys.modules[name] = None``
        pass
    shim = types.ModuleType(SHIM_NAME, "importlib.metadata-backed stand-in for milvus-lite 2.5.1 (llama-index-convrag)")
    shim.DistributionNotFound = importlib.metadata.PackageNotFoundError  # type: ignore[attr-defined]
    shim.get_distribution = _get_distribution  # type: ignore[attr-defined]
    sys.modules[SHIM_NAME] = shim
    return True
