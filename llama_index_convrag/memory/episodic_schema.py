"""The episodic memory collection: one row per message, searchable under its own text and its context text.

Fields: ``id`` (``<conversation>:<position>``), ``doc_id`` (the conversation), ``owner``, ``conversation_id`` and
``position`` as scalar filter fields (every search and delete names the owner and the conversation), ``text`` and
``context`` (each with a BM25 field filled by Milvus), a dense vector of each, and ``metadata`` (JSON: message id,
speaker, turn, time, date label, session, the message's own words).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from pymilvus import DataType, Function, FunctionType, MilvusClient

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.client import validate_collection_name
from llama_index_convrag.milvus.schema import ANALYZERS, BM25, DENSE, CollectionSpec, VectorField, default_dense_index

DEFAULT_COLLECTION = "convrag_memory"
OWN_DENSE, OWN_SPARSE = "embedding", "sparse_embedding"
CONTEXT_DENSE, CONTEXT_SPARSE = "context_embedding", "context_sparse"
#: The searched fields in the order of :meth:`~.rules.RecallRules.weights`.
SEARCH_FIELDS = (OWN_DENSE, OWN_SPARSE, CONTEXT_DENSE, CONTEXT_SPARSE)
FILTER_FIELDS = ("owner", "conversation_id", "position")
ID_MAX = 512
NAME_MAX = 256
TEXT_MAX = 65_535


def episodic_spec(dim: int) -> CollectionSpec:
    """Where each part of a memory row lives (the retriever reads it; ``layout='custom'``: not a document
    collection)."""
    return CollectionSpec(
        primary_field="id", doc_id_field="doc_id", text_field="text",
        vector_fields=(VectorField(OWN_DENSE, DENSE, "COSINE", dim), VectorField(OWN_SPARSE, BM25, "BM25"),
                       VectorField(CONTEXT_DENSE, DENSE, "COSINE", dim), VectorField(CONTEXT_SPARSE, BM25, "BM25")),
        metadata_field="metadata", scalar_metadata_fields=FILTER_FIELDS, dynamic=False, layout="custom")


def create_episodic_collection(client: MilvusClient, collection_name: str, dim: int, *, is_lite: bool = True,
                               analyzer: str = "english", dense_index: Optional[Dict[str, Any]] = None) -> bool:
    """Create the collection unless it exists; True when it was created."""
    validate_collection_name(collection_name)
    if analyzer not in ANALYZERS:
        raise ConfigurationError(f"analyzer must be one of {sorted(ANALYZERS)}, got {analyzer!r}")
    if client.has_collection(collection_name):
        return False
    index = default_dense_index(is_lite) if dense_index is None else dense_index
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, max_length=ID_MAX, is_primary=True)
    schema.add_field("doc_id", DataType.VARCHAR, max_length=ID_MAX)
    schema.add_field("owner", DataType.VARCHAR, max_length=NAME_MAX)
    schema.add_field("conversation_id", DataType.VARCHAR, max_length=NAME_MAX)
    schema.add_field("position", DataType.INT64)
    params = client.prepare_index_params()
    for text_field, sparse in (("text", OWN_SPARSE), ("context", CONTEXT_SPARSE)):
        schema.add_field(text_field, DataType.VARCHAR, max_length=TEXT_MAX, enable_analyzer=True,
                         analyzer_params=ANALYZERS[analyzer])
        schema.add_field(sparse, DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(Function(name=f"bm25_{sparse}", function_type=FunctionType.BM25,
                                     input_field_names=[text_field], output_field_names=[sparse]))
        params.add_index(sparse, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                         params={"bm25_k1": 1.2, "bm25_b": 0.75})
    for dense in (OWN_DENSE, CONTEXT_DENSE):
        schema.add_field(dense, DataType.FLOAT_VECTOR, dim=dim)
        params.add_index(dense, index_type=index["index_type"], metric_type="COSINE",
                         params=dict(index.get("params", {})))
    schema.add_field("metadata", DataType.JSON)
    client.create_collection(collection_name, schema=schema, index_params=params)
    return True
