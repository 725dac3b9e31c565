"""Everything that talks to Milvus: targets and clients (``client``), the collection layout (``schema``), metadata
filters as Milvus expressions (``filters``) and a LlamaIndex vector store over our layout (``vector_store``).
Errors are in :mod:`llama_index_convrag.errors`.

``ingest/``, ``retrievers/``, ``indices/`` and ``evaluation/`` stand on this floor. Names are exported lazily, so
importing this package (or ``milvus.filters``) does not import pymilvus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "MilvusTarget": "client",
    "resolve_milvus": "client",
    "default_milvus_uri": "client",
    "connect_milvus": "client",
    "connect_milvus_async": "client",
    "LITE_GRPC_OPTIONS": "client",
    "server_log_path": "client",
    "CollectionSpec": "schema",
    "VectorField": "schema",
    "default_spec": "schema",
    "create_collection": "schema",
    "detect_spec": "schema",
    "filters_to_expr": "filters",
    "quote_string": "filters",
    "ConvRAGMilvusStore": "vector_store",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.milvus.client import (
        LITE_GRPC_OPTIONS,
        MilvusTarget,
        connect_milvus,
        connect_milvus_async,
        default_milvus_uri,
        resolve_milvus,
        server_log_path,
    )
    from llama_index_convrag.milvus.filters import filters_to_expr, quote_string
    from llama_index_convrag.milvus.schema import CollectionSpec, VectorField, create_collection, default_spec, detect_spec
    from llama_index_convrag.milvus.vector_store import ConvRAGMilvusStore
