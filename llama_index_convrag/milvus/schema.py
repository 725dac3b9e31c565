"""Collection layout: our default schema, its creation, and auto-detection of existing layouts.

A :class:`CollectionSpec` names the fields a retriever needs (primary key, document id, text, vector fields and
where metadata lives). :func:`detect_spec` reads it from a live collection, so the retriever also works on
collections made by ``llama-index-vector-stores-milvus`` (``MilvusVectorStore(enable_sparse=True)``: ``id``,
``doc_id``, ``text``, ``embedding``, ``sparse_embedding``, metadata in dynamic fields plus ``_node_content``) and by
``langchain-milvus`` (``pk``, ``text``, ``vector``, ``sparse``, metadata as scalar fields or a JSON field).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from llama_index.core.schema import BaseNode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.utils import node_to_metadata_dict
from pymilvus import DataType, Function, FunctionType, MilvusClient, MilvusException

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus, validate_collection_name
from llama_index_convrag.milvus.filters import quote_string

logger = logging.getLogger(__name__)

DENSE = "dense"
BM25 = "bm25"
SPARSE = "sparse"  # a sparse vector field filled by the client (e.g. BGE-M3): needs a query encoder
LAYOUTS = ("convrag", "llamaindex", "langchain", "custom")
LLAMAINDEX_NODE_CONTENT = "_node_content"
DYNAMIC = "$meta"
DOC_ID_KEY = "doc_id"
#: Bookkeeping metadata kept out of LLM prompts and embeddings.
HIDDEN_METADATA_KEYS = ("doc_id", "file_path", "content_hash", "last_modified", "chunk", "chunk_count")

#: Analyzers by language; ``english`` stems and drops stop words (C++ Milvus Lite 2.5.1 and servers >= 2.5).
ANALYZERS: Dict[str, Dict[str, Any]] = {
    "english": {"type": "english"},
    "standard": {"type": "standard"},
    "chinese": {"type": "chinese"},
    "jieba": {"tokenizer": "jieba"},
}
#: Lucene's English stop words (Milvus' ``_english_`` list).
ENGLISH_STOP_WORDS = ("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
                      "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they",
                      "this", "to", "was", "will", "with")
#: What Milvus Lite 3.x (tokenizers ``standard`` and ``jieba`` only, no stemmer) gets instead: ``english`` keeps its
#: stop words but loses stemming ("cats" no longer matches "cat").
LITE3_ANALYZERS: Dict[str, Dict[str, Any]] = {
    "english": {"tokenizer": "standard", "filter": ["lowercase", {"type": "stop", "stop_words": list(ENGLISH_STOP_WORDS)}]},
    "chinese": {"tokenizer": "jieba"},
}


@dataclass(frozen=True)
class VectorField:
    """One searchable vector field: ``kind`` is ``dense``, ``bm25`` (Milvus Function) or ``sparse``."""

    name: str
    kind: str
    metric: str
    dim: Optional[int] = None

    @property
    def higher_is_better(self) -> bool:
        return self.metric.upper() not in ("L2", "HAMMING", "JACCARD")


@dataclass(frozen=True)
class CollectionSpec:
    """Where each part of a chunk lives in a collection."""

    primary_field: str = "id"
    doc_id_field: Optional[str] = "doc_id"
    text_field: str = "text"
    vector_fields: Tuple[VectorField, ...] = (
        VectorField("embedding", DENSE, "COSINE", 384),
        VectorField("sparse_embedding", BM25, "BM25"),
    )
    metadata_field: Optional[str] = "metadata"  # JSON field; None: metadata in scalar/dynamic fields
    scalar_metadata_fields: Tuple[str, ...] = ()
    dynamic: bool = True
    node_content_field: Optional[str] = None
    layout: str = "convrag"
    #: The embedding model (and variant) that wrote the dense vectors, as recorded in the collection (None: unknown).
    embed_model: Optional[str] = field(default=None, compare=False)
    fields_by_name: Dict[str, VectorField] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigurationError(f"layout must be one of {list(LAYOUTS)}, got {self.layout!r}")
        self.fields_by_name.update({f.name: f for f in self.vector_fields})

    @property
    def dense_fields(self) -> Tuple[str, ...]:
        return tuple(f.name for f in self.vector_fields if f.kind == DENSE)

    @property
    def bm25_fields(self) -> Tuple[str, ...]:
        return tuple(f.name for f in self.vector_fields if f.kind == BM25)

    def vector(self, name: str) -> VectorField:
        found = self.fields_by_name.get(name)
        if found is None:
            raise ConfigurationError(f"unknown vector field {name!r}; the collection has {sorted(self.fields_by_name)}")
        return found

    def metadata_ref(self, key: str) -> str:
        """The filter expression that addresses metadata ``key`` (escaped; control characters in keys are refused:
        Milvus' JSON path lookup does not match them, measured on Milvus Lite 2.5.1)."""
        if any(ord(ch) < 32 for ch in key):
            raise ConfigurationError(f"metadata key {key!r} contains a control character; Milvus cannot address it")
        if key in self.scalar_metadata_fields:
            return key
        if self.metadata_field is not None:
            return f"{self.metadata_field}[{quote_string(key)}]"
        if self.dynamic:
            return f"{DYNAMIC}[{quote_string(key)}]"
        raise ConfigurationError(f"metadata key {key!r} is not a field of this collection and it has no dynamic field")

    def output_fields(self) -> list:
        """Scalar fields a retriever needs to rebuild a node (never vectors or BM25 outputs)."""
        out = [self.text_field]
        if self.doc_id_field is not None:
            out.append(self.doc_id_field)
        if self.metadata_field is not None:
            out.append(self.metadata_field)
        out.extend(self.scalar_metadata_fields)
        if self.node_content_field is not None:
            out.append(self.node_content_field)
        return out


def default_spec(dim: int = 384, extra_dense: Optional[Mapping[str, int]] = None, metric: str = "COSINE",
                 embed_model: Optional[str] = None) -> CollectionSpec:
    """Our layout: ``id``, ``doc_id``, ``text`` (+BM25 ``sparse_embedding``), ``embedding`` [+ extras], ``metadata``;
    ``embed_model`` is recorded in the collection when it is created."""
    fields = [VectorField("embedding", DENSE, metric, dim)]
    for name, d in (extra_dense or {}).items():
        fields.append(VectorField(name, DENSE, metric, d))
    fields.append(VectorField("sparse_embedding", BM25, "BM25"))
    return CollectionSpec(vector_fields=tuple(fields), embed_model=embed_model)


#: How a collection records the model that wrote its vectors: its schema description (Milvus Lite 2.5.1 keeps no
#: collection properties and cannot alter them, so the description, written once at creation, is the record).
EMBED_RECORD = "convrag embed_model="


def embed_model_record(description: Any) -> Optional[str]:
    """The embedding model a collection's description records (None when it records none)."""
    text = str(description or "")
    if not text.startswith(EMBED_RECORD):
        return None
    return text[len(EMBED_RECORD):].strip() or None


def check_embed_model(spec: CollectionSpec, embed_model: Optional[str], collection_name: str) -> None:
    """Refuse ``embed_model`` on a collection another model (or another variant of it) wrote; a collection that
    records no model (made before the record, or by another tool) and a caller that names none pass."""
    if spec.embed_model is None or embed_model is None or spec.embed_model == embed_model:
        return
    raise ConfigurationError(
        f"collection {collection_name!r} holds vectors of {spec.embed_model!r}; this embedding model is "
        f"{embed_model!r}: vectors of two models (or two variants of one) never mix in one collection. "
        f"{way_out(spec.embed_model, embed_model)}, or ingest into another collection")


#: The id prefix of the local model's vectors (``LocalMiniLMEmbedding.embed_model_id``), whose last part is the variant.
LOCAL_MODEL_ID = "LocalMiniLMEmbedding:"


def way_out(recorded: str, given: str) -> str:
    """How to open a collection ``recorded`` wrote: for another variant of the local model, the setting that picks the
    variant that wrote it (for another build of the same variant, which this version cannot run: ingest again); else
    the model itself."""
    head, _, variant = recorded.rpartition(":")
    if head.startswith(LOCAL_MODEL_ID) and head == given.rpartition(":")[0]:
        name = variant.split("-")[0]
        if name == given.rpartition(":")[2].split("-")[0]:
            return (f"Its {name} vectors come from another build of that variant than this version runs; "
                    "ingest the files again")
        return (f"Open it with the {name} variant that wrote it (CONVRAG_EMBED_MODEL=local:{name} or "
                f"LocalMiniLMEmbedding(variant={name!r}))")
    return "Use the model that wrote it"


def default_dense_index(is_lite: bool) -> Dict[str, Any]:
    """FLAT on Milvus Lite (2.5.1 has FLAT/IVF_FLAT/AUTOINDEX; exact and fast at Lite sizes), HNSW on a server."""
    if is_lite:
        return {"index_type": "FLAT", "params": {}}
    return {"index_type": "HNSW", "params": {"M": 16, "efConstruction": 200}}


def create_collection(
    client: MilvusClient,
    collection_name: str,
    spec: CollectionSpec,
    *,
    is_lite: bool = True,
    analyzer: str = "english",
    analyzer_params: Optional[Dict[str, Any]] = None,
    dense_index: Optional[Dict[str, Any]] = None,
    bm25_k1: float = 1.2,
    bm25_b: float = 0.75,
    text_max_length: int = 65_535,
) -> None:
    """Create ``collection_name`` with ``spec`` (convrag layout); no-op when it already exists."""
    validate_collection_name(collection_name)
    if spec.layout != "convrag":
        raise ConfigurationError(f"only the 'convrag' layout can be created here, got {spec.layout!r}")
    if client.has_collection(collection_name):
        return
    named = analyzer_params is None
    if analyzer_params is None:
        if analyzer not in ANALYZERS:
            raise ConfigurationError(f"analyzer must be one of {sorted(ANALYZERS)}, got {analyzer!r}")
        analyzer_params = ANALYZERS[analyzer]
    build = lambda params: _create(client, collection_name, spec, params, is_lite, dense_index, bm25_k1,  # noqa: E731
                                   bm25_b, text_max_length)
    try:
        build(analyzer_params)
    except MilvusException as e:
        if not (named and analyzer in LITE3_ANALYZERS and "unknown tokenizer type" in str(e)):
            raise
        logger.warning("Milvus refused the %r analyzer (%s); using %s (Milvus Lite 3.x: no stemming)",
                       analyzer, e, LITE3_ANALYZERS[analyzer])
        build(LITE3_ANALYZERS[analyzer])


def _create(client: MilvusClient, collection_name: str, spec: CollectionSpec, analyzer_params: Dict[str, Any],
            is_lite: bool, dense_index: Optional[Dict[str, Any]], bm25_k1: float, bm25_b: float,
            text_max_length: int) -> None:
    index = default_dense_index(is_lite) if dense_index is None else dense_index
    description = f"{EMBED_RECORD}{spec.embed_model}" if spec.embed_model else ""
    schema = client.create_schema(auto_id=False, enable_dynamic_field=spec.dynamic, description=description)
    schema.add_field(spec.primary_field, DataType.VARCHAR, max_length=128, is_primary=True)
    if spec.doc_id_field is not None:
        schema.add_field(spec.doc_id_field, DataType.VARCHAR, max_length=2048)
    schema.add_field(spec.text_field, DataType.VARCHAR, max_length=text_max_length,
                     enable_analyzer=True, analyzer_params=analyzer_params, enable_match=True)
    params = client.prepare_index_params()
    for vf in spec.vector_fields:
        if vf.kind == DENSE:
            if vf.dim is None:
                raise ConfigurationError(f"dense field {vf.name!r} needs a dim")
            schema.add_field(vf.name, DataType.FLOAT_VECTOR, dim=vf.dim)
            params.add_index(vf.name, index_type=index["index_type"], metric_type=vf.metric,
                             params=dict(index.get("params", {})))
        elif vf.kind == BM25:
            schema.add_field(vf.name, DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(Function(name=f"bm25_{vf.name}", function_type=FunctionType.BM25,
                                         input_field_names=[spec.text_field], output_field_names=[vf.name]))
            params.add_index(vf.name, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                             params={"bm25_k1": bm25_k1, "bm25_b": bm25_b})
        else:
            raise ConfigurationError(f"cannot create a {vf.kind!r} field; kinds: {[DENSE, BM25]}")
    if spec.metadata_field is not None:
        schema.add_field(spec.metadata_field, DataType.JSON)
    client.create_collection(collection_name, schema=schema, index_params=params)


def _metrics(client: MilvusClient, collection_name: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for index_name in client.list_indexes(collection_name):
        info = client.describe_index(collection_name, index_name)
        if info.get("field_name") and info.get("metric_type"):
            out[info["field_name"]] = str(info["metric_type"]).upper()
    return out


def detect_spec(client: MilvusClient, collection_name: str) -> CollectionSpec:
    """Read the layout of an existing collection (ours, LlamaIndex's, langchain-milvus' or another).

    This is the only I/O a retriever does at construction: ``describe_collection`` + ``describe_index``.
    """
    if not client.has_collection(collection_name):
        raise ConfigurationError(f"collection {collection_name!r} does not exist")
    desc = client.describe_collection(collection_name)
    metrics = _metrics(client, collection_name)
    fields = desc["fields"]
    bm25_inputs: Dict[str, str] = {}
    for fn in desc.get("functions", []) or []:
        if str(fn.get("type")).upper().endswith("BM25") or fn.get("type") == FunctionType.BM25:
            for out in fn.get("output_field_names", []):
                bm25_inputs[out] = fn.get("input_field_names", [None])[0]
    primary = next(f["name"] for f in fields if f.get("is_primary"))
    vectors, scalars, analyzed, json_fields = [], [], [], []
    for f in fields:
        t, name = f["type"], f["name"]
        if t == DataType.FLOAT_VECTOR:
            vectors.append(VectorField(name, DENSE, metrics.get(name, "COSINE"), int(f["params"]["dim"])))
        elif t == DataType.SPARSE_FLOAT_VECTOR:
            is_bm25 = name in bm25_inputs or f.get("is_function_output") or metrics.get(name) == "BM25"
            vectors.append(VectorField(name, BM25 if is_bm25 else SPARSE, metrics.get(name, "BM25" if is_bm25 else "IP")))
        elif t == DataType.JSON:
            json_fields.append(name)
        elif name != primary:
            scalars.append(name)
            if str(f.get("params", {}).get("enable_analyzer", "")).lower() == "true":
                analyzed.append(name)
    if not vectors:
        raise ConfigurationError(f"collection {collection_name!r} has no vector field")
    text = next(iter(bm25_inputs.values()), None) or (analyzed[0] if analyzed else None)
    if text is None:
        text = next((n for n in ("text", "page_content", "content") if n in scalars), None)
    if text is None:
        raise ConfigurationError(f"collection {collection_name!r}: cannot tell the text field among {scalars}")
    names = {f["name"] for f in fields}
    doc_id = "doc_id" if "doc_id" in names else None
    metadata = "metadata" if "metadata" in json_fields else (json_fields[0] if len(json_fields) == 1 else None)
    dynamic = bool(desc.get("enable_dynamic_field"))
    if primary == "id" and "embedding" in names and metadata is None and dynamic:
        layout, node_content = "llamaindex", LLAMAINDEX_NODE_CONTENT
    elif primary == "pk" and "vector" in names:
        layout, node_content = "langchain", None
    elif metadata == "metadata" and doc_id == "doc_id" and primary == "id":
        layout, node_content = "convrag", None
    else:
        layout, node_content = "custom", None
    extra = tuple(n for n in scalars if n not in (text, doc_id))
    if layout == "llamaindex":
        extra = ()
    return CollectionSpec(primary_field=primary, doc_id_field=doc_id, text_field=text, vector_fields=tuple(vectors),
                          metadata_field=metadata, scalar_metadata_fields=extra, dynamic=dynamic,
                          node_content_field=node_content, layout=layout,
                          embed_model=embed_model_record(desc.get("description")))


def open_client(client: Optional[MilvusClient], target: Optional[MilvusTarget]) -> MilvusClient:
    """``client`` if given, else the cached client for ``target`` (errors name the URI)."""
    if client is not None:
        return client
    if target is None:
        raise ConfigurationError("give a MilvusClient (client=) or a MilvusTarget (target=)")
    return connect_milvus(target)


def llamaindex_fields(node: BaseNode) -> Dict[str, Any]:
    """The dynamic fields LlamaIndex's ``MilvusVectorStore`` rebuilds a node from (``_node_content``: the node without
    its text, metadata and relationships included; ``_node_type``), so that store reads our rows with its defaults."""
    fields = node_to_metadata_dict(node, remove_text=True, flat_metadata=False)
    return {LLAMAINDEX_NODE_CONTENT: fields[LLAMAINDEX_NODE_CONTENT], "_node_type": fields["_node_type"]}


def node_from_entity(spec: CollectionSpec, pk: Any, entity: Mapping[str, Any]) -> TextNode:
    """A ``TextNode`` from a Milvus row: id = primary key as a string, ``ref_doc_id`` = the document id."""
    metadata: Dict[str, Any] = {}
    if spec.node_content_field is not None and entity.get(spec.node_content_field):
        try:
            metadata.update(json.loads(entity[spec.node_content_field]).get("metadata", {}))
        except (TypeError, ValueError):
            pass
    if spec.metadata_field is not None and isinstance(entity.get(spec.metadata_field), dict):
        metadata.update(entity[spec.metadata_field])
    for key in spec.scalar_metadata_fields:
        if key in entity:
            metadata[key] = entity[key]
    node = TextNode(id_=str(pk), text=str(entity.get(spec.text_field, "")), metadata=metadata,
                    excluded_llm_metadata_keys=list(HIDDEN_METADATA_KEYS),
                    excluded_embed_metadata_keys=list(HIDDEN_METADATA_KEYS))
    doc_id = entity.get(spec.doc_id_field) if spec.doc_id_field is not None else None
    if doc_id is None:
        doc_id = metadata.get(DOC_ID_KEY, metadata.get("ref_doc_id"))
    if doc_id is not None:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=str(doc_id))
        node.metadata.setdefault(DOC_ID_KEY, str(doc_id))
    return node
