"""The episodic memory collection: two rows per message, one for its own text and one for its context text.

Fields: ``id`` (``<scope>:<position>`` for the own-text row, the same with ``:c`` for the context row), ``doc_id``
(the conversation), ``owner``, ``conversation_id``, ``position`` and ``kind`` (:data:`OWN` or :data:`CONTEXT`) as
scalar filter fields (every search and delete names the owner and the conversation), ``text`` (with a BM25 field
filled by Milvus), its dense vector, and ``metadata`` (JSON: message id, speaker, turn, time, date label, session, the
message's own words) on both rows. Both kinds share the vector fields, so one dense and one BM25 search return the
four ranked lists of a recall (split by ``kind``) with every field a recalled message needs.

A collection of the earlier layout (one row per message, separate context fields; no ``kind``) is recognised by
:func:`layout_of` and rebuilt: see :meth:`~.episodic.EpisodicMemory.ensure_collection`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from pymilvus import DataType, Function, FunctionType, MilvusClient

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.client import validate_collection_name
from llama_index_convrag.milvus.schema import ANALYZERS, default_dense_index

DEFAULT_COLLECTION = "convrag_memory"
DENSE_FIELD, SPARSE_FIELD = "embedding", "sparse_embedding"
#: ``kind`` of the own-text row and of the context row of a message.
OWN, CONTEXT = 0, 1
KIND_NAMES = {OWN: "own", CONTEXT: "context"}
#: What a search returns of each hit (what a recalled message needs; no vectors, no indexed text).
OUTPUT_FIELDS = ["position", "kind", "metadata", "owner", "conversation_id"]
CONTEXT_SUFFIX = ":c"
ID_MAX = 512
NAME_MAX = 256
TEXT_MAX = 65_535
#: The layouts :func:`layout_of` tells apart.
CURRENT, OLD = "own+context rows", "one row per message"


def layout_of(client: MilvusClient, collection_name: str) -> Optional[str]:
    """:data:`CURRENT`, :data:`OLD` (a collection without ``kind``), or None when the collection does not exist."""
    if not client.has_collection(collection_name):
        return None
    fields = {f["name"] for f in client.describe_collection(collection_name)["fields"]}
    return CURRENT if "kind" in fields else OLD


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
    schema.add_field("kind", DataType.INT8)
    schema.add_field("text", DataType.VARCHAR, max_length=TEXT_MAX, enable_analyzer=True,
                     analyzer_params=ANALYZERS[analyzer])
    schema.add_field(SPARSE_FIELD, DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name=f"bm25_{SPARSE_FIELD}", function_type=FunctionType.BM25,
                                 input_field_names=["text"], output_field_names=[SPARSE_FIELD]))
    schema.add_field(DENSE_FIELD, DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("metadata", DataType.JSON)
    params = client.prepare_index_params()
    params.add_index(SPARSE_FIELD, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                     params={"bm25_k1": 1.2, "bm25_b": 0.75})
    params.add_index(DENSE_FIELD, index_type=index["index_type"], metric_type="COSINE",
                     params=dict(index.get("params", {})))
    client.create_collection(collection_name, schema=schema, index_params=params)
    return True
