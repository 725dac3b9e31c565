"""Conversation stores (``storage.conversation``). The Milvus connection names that lived here moved to
:mod:`llama_index_convrag.milvus.client` and stay importable from here (lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

_MILVUS = "llama_index_convrag.milvus.client"
#: public name -> module that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "connect_milvus": _MILVUS,
    "connect_milvus_async": _MILVUS,
    "LITE_GRPC_OPTIONS": _MILVUS,
    "MilvusConnectionError": _MILVUS,
    "server_log_path": _MILVUS,
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.milvus.client import (
        LITE_GRPC_OPTIONS,
        MilvusConnectionError,
        connect_milvus,
        connect_milvus_async,
        server_log_path,
    )
