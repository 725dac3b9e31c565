"""Indices over Milvus collections."""

from llama_index_convrag.indices.convrag_index import ConvRAGIndex
from llama_index_convrag.indices.milvus_store import ConvRAGMilvusStore

__all__ = ["ConvRAGIndex", "ConvRAGMilvusStore"]
