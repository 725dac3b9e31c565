"""Embedding models that run offline."""

from llama_index_convrag.embeddings.local import EMBED_DIM, LocalMiniLMEmbedding

__all__ = ["EMBED_DIM", "LocalMiniLMEmbedding"]
