"""Retrievers over Milvus."""

from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from llama_index_convrag.retrievers.params import RetrieverParams, validate_params

__all__ = ["MilvusHybridRetriever", "RetrieverParams", "validate_params"]
