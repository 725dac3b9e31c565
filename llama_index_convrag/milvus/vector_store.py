"""A thin LlamaIndex vector store over a collection in our layout, so ``VectorStoreIndex`` insert/delete work.

Rows: primary key = node id, ``doc_id`` = ``node.ref_doc_id``, ``text``, the first dense field = node embedding,
``metadata`` JSON = node metadata (BM25 is filled by Milvus), and the dynamic fields ``_node_content`` /
``_node_type`` LlamaIndex's ``MilvusVectorStore`` reads nodes from. Querying through ``VectorStoreIndex``'s default
retriever runs a dense search; :class:`MilvusHybridRetriever` is the full retriever.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from pymilvus import MilvusClient

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.filters import combine, filters_to_expr, quote_string
from llama_index_convrag.milvus.schema import CollectionSpec, llamaindex_fields, node_from_entity

DEFAULT_INSERT_BATCH = 256


class ConvRAGMilvusStore(BasePydanticVectorStore):
    """Writes and deletes rows of a ``convrag``-layout collection; no I/O at construction."""

    stores_text: bool = True
    flat_metadata: bool = False
    collection_name: str
    batch_size: int = DEFAULT_INSERT_BATCH

    _client: MilvusClient = PrivateAttr()
    _spec: CollectionSpec = PrivateAttr()

    def __init__(self, *, client: MilvusClient, collection_name: str, spec: CollectionSpec,
                 batch_size: int = DEFAULT_INSERT_BATCH) -> None:
        if spec.layout != "convrag":
            raise ConfigurationError(f"ConvRAGMilvusStore writes the 'convrag' layout, collection {collection_name!r} "
                             f"is {spec.layout!r}; use MilvusHybridRetriever.from_defaults to read it")
        super().__init__(collection_name=collection_name, batch_size=batch_size)
        self._client = client
        self._spec = spec

    @classmethod
    def class_name(cls) -> str:
        return "ConvRAGMilvusStore"

    @property
    def client(self) -> MilvusClient:
        return self._client

    @property
    def spec(self) -> CollectionSpec:
        return self._spec

    def _row(self, node: BaseNode) -> dict:
        spec = self._spec
        if node.embedding is None:
            raise ConfigurationError(f"node {node.node_id!r} has no embedding")
        metadata = dict(node.metadata)
        return {
            spec.primary_field: node.node_id,
            spec.doc_id_field: node.ref_doc_id if node.ref_doc_id is not None else node.node_id,
            spec.text_field: node.get_content(metadata_mode=MetadataMode.NONE),
            spec.dense_fields[0]: list(node.embedding),
            spec.metadata_field: metadata,
            **llamaindex_fields(node),
        }

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> List[str]:
        rows = [self._row(n) for n in nodes]
        for i in range(0, len(rows), self.batch_size):
            self._client.upsert(self.collection_name, rows[i : i + self.batch_size])
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        self._client.delete(self.collection_name, filter=f"{self._spec.doc_id_field} == {quote_string(ref_doc_id)}")

    def delete_nodes(self, node_ids: Optional[List[str]] = None, filters: Optional[MetadataFilters] = None,
                     **delete_kwargs: Any) -> None:
        parts = []
        if node_ids is not None:
            parts.append(f"{self._spec.primary_field} in [{', '.join(quote_string(i) for i in node_ids)}]")
        parts.append(filters_to_expr(filters, self._spec.metadata_ref))
        expr = combine(*parts)
        if not expr:
            raise ConfigurationError("delete_nodes needs node_ids or filters (refusing to delete everything)")
        self._client.delete(self.collection_name, filter=expr)

    def get_nodes(self, node_ids: Optional[List[str]] = None, filters: Optional[MetadataFilters] = None
                  ) -> List[BaseNode]:
        spec = self._spec
        parts = []
        if node_ids is not None:
            parts.append(f"{spec.primary_field} in [{', '.join(quote_string(i) for i in node_ids)}]")
        parts.append(filters_to_expr(filters, spec.metadata_ref))
        rows = self._client.query(self.collection_name, filter=combine(*parts),
                                  output_fields=[spec.primary_field, *spec.output_fields()], limit=16384)
        return [node_from_entity(spec, r[spec.primary_field], r) for r in rows]

    def clear(self) -> None:
        self._client.delete(self.collection_name, filter=f'{self._spec.primary_field} != ""')

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Dense search on the first dense field (LlamaIndex's default retriever path)."""
        spec = self._spec
        if query.query_embedding is None:
            raise ConfigurationError("ConvRAGMilvusStore.query needs query_embedding; use MilvusHybridRetriever for BM25")
        field = spec.vector(spec.dense_fields[0])
        expr = combine(filters_to_expr(query.filters, spec.metadata_ref),
                       "" if query.doc_ids is None else
                       f"{spec.doc_id_field} in [{', '.join(quote_string(d) for d in query.doc_ids)}]")
        res = self._client.search(self.collection_name, data=[query.query_embedding], anns_field=field.name,
                                  limit=query.similarity_top_k, filter=expr,
                                  search_params={"metric_type": field.metric, "params": {}},
                                  output_fields=spec.output_fields())[0]
        nodes, ids, sims = [], [], []
        for hit in res:
            nodes.append(node_from_entity(spec, hit["id"], hit["entity"]))
            ids.append(str(hit["id"]))
            sims.append(float(hit["distance"]))
        return VectorStoreQueryResult(nodes=nodes, similarities=sims, ids=ids)
