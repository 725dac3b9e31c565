"""Indices over Milvus collections (their vector store is :mod:`llama_index_convrag.milvus.vector_store`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "ConvRAGIndex": "convrag_index",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.indices.convrag_index import ConvRAGIndex
