"""Retrievers over Milvus."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "MilvusHybridRetriever": "milvus_hybrid",
    "RetrieverParams": "params",
    "validate_params": "params",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
    from llama_index_convrag.retrievers.params import RetrieverParams, validate_params
