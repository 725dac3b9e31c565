"""Query and node vectors for the similarity-based selectors (MMR, budgeted coverage), and their template."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.postprocessors.events import NodeSelectionEndEvent, NodeSelectionStartEvent

dispatcher = get_dispatcher(__name__)


def _missing(nodes: Sequence[NodeWithScore]) -> List[int]:
    return [i for i, n in enumerate(nodes) if n.node.embedding is None]


def _need_model(embed_model: Optional[BaseEmbedding], what: str) -> BaseEmbedding:
    if embed_model is None:
        raise ConfigurationError(f"{what} and no embed_model was given: pass embed_model to compute them")
    return embed_model


def _assemble(nodes: Sequence[NodeWithScore], missing: List[int], computed: Sequence[Sequence[float]]) -> np.ndarray:
    rows = [n.node.embedding for n in nodes]
    for i, vec in zip(missing, computed):
        rows[i] = list(vec)
    return unit_rows(np.asarray(rows, dtype=np.float64))


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.clip(norms, 1e-12, None)


def node_vectors(nodes: Sequence[NodeWithScore], embed_model: Optional[BaseEmbedding]) -> np.ndarray:
    """Unit vectors of the nodes: their stored ``embedding``, else embedded now (the stored ones are not)."""
    missing = _missing(nodes)
    computed: List[List[float]] = []
    if missing:
        model = _need_model(embed_model, f"{len(missing)} of {len(nodes)} nodes carry no embedding")
        computed = model.get_text_embedding_batch(
            [nodes[i].node.get_content(metadata_mode=MetadataMode.EMBED) for i in missing]
        )
    return _assemble(nodes, missing, computed)


async def anode_vectors(nodes: Sequence[NodeWithScore], embed_model: Optional[BaseEmbedding]) -> np.ndarray:
    missing = _missing(nodes)
    computed: List[List[float]] = []
    if missing:
        model = _need_model(embed_model, f"{len(missing)} of {len(nodes)} nodes carry no embedding")
        computed = await model.aget_text_embedding_batch(
            [nodes[i].node.get_content(metadata_mode=MetadataMode.EMBED) for i in missing]
        )
    return _assemble(nodes, missing, computed)


def _query_bundle(query_bundle: Optional[QueryBundle], component: str) -> QueryBundle:
    if query_bundle is None:
        raise ConfigurationError(f"{component} needs the query: pass query_bundle or query_str")
    return query_bundle


def query_vector(query_bundle: Optional[QueryBundle], embed_model: Optional[BaseEmbedding], component: str) -> np.ndarray:
    """Unit query vector: ``query_bundle.embedding`` when set, else embedded with ``embed_model``."""
    bundle = _query_bundle(query_bundle, component)
    if bundle.embedding is not None:
        return unit_rows(np.asarray(bundle.embedding, dtype=np.float64))
    model = _need_model(embed_model, "the query bundle carries no embedding")
    return unit_rows(np.asarray(model.get_agg_embedding_from_queries(bundle.embedding_strs), dtype=np.float64))


async def aquery_vector(
    query_bundle: Optional[QueryBundle], embed_model: Optional[BaseEmbedding], component: str
) -> np.ndarray:
    bundle = _query_bundle(query_bundle, component)
    if bundle.embedding is not None:
        return unit_rows(np.asarray(bundle.embedding, dtype=np.float64))
    model = _need_model(embed_model, "the query bundle carries no embedding")
    vec = await model.aget_agg_embedding_from_queries(bundle.embedding_strs)
    return unit_rows(np.asarray(vec, dtype=np.float64))


class VectorSelector(BaseNodePostprocessor):
    """Template for selectors that need the query vector and node vectors (MMR, budgeted coverage).

    Subclasses implement :meth:`_params` (reported in the start event) and :meth:`_select`.
    """

    embed_model: Optional[BaseEmbedding] = Field(
        default=None, exclude=True, description="Embeds the query and nodes without a stored embedding."
    )

    def _params(self) -> Dict[str, Any]:
        raise NotImplementedError

    def _select(self, nodes: List[NodeWithScore], q: np.ndarray, docs: np.ndarray) -> List[NodeWithScore]:
        raise NotImplementedError

    def _emit_start(self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle]) -> None:
        dispatcher.event(NodeSelectionStartEvent(component=self.class_name(), query=query_bundle, nodes=nodes,
                                                 params=self._params()))

    def _emit_end(self, nodes: List[NodeWithScore], out: List[NodeWithScore], **details: Any) -> List[NodeWithScore]:
        dispatcher.event(NodeSelectionEndEvent(component=self.class_name(), nodes=out,
                                               num_dropped=len(nodes) - len(out), details=details))
        return out

    def _postprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        q = query_vector(query_bundle, self.embed_model, self.class_name())
        if not nodes:
            return []
        self._emit_start(nodes, query_bundle)
        return self._select(nodes, q, node_vectors(nodes, self.embed_model))

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        q = await aquery_vector(query_bundle, self.embed_model, self.class_name())
        if not nodes:
            return []
        self._emit_start(nodes, query_bundle)
        return self._select(nodes, q, await anode_vectors(nodes, self.embed_model))
