"""Storage adapters: Milvus connections and conversation stores."""

from llama_index_convrag.storage.milvus import MilvusConnectionError, connect_milvus

__all__ = ["MilvusConnectionError", "connect_milvus"]
