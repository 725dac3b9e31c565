"""ModelRerank: re-score (query, passage) pairs with a pluggable scorer, keep the best ``top_n``.

If the scorer raises, the incoming order is kept (cut to ``top_n``), each node is marked under
``FALLBACK_KEY`` in its metadata (hidden from the LLM and the embedder), a warning is logged and a
:class:`RerankFallbackEvent` is emitted: a reranker outage never drops the answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import List, Optional, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts.mixin import PromptMixin, PromptMixinType
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.postprocessors.events import RerankFallbackEvent
from llama_index_convrag.postprocessors.scorers.base import Scorer, check_scores
from llama_index_convrag.postprocessors.scorers.embedding import EmbeddingScorer
from llama_index_convrag.rank_trail import add_stage, hide_key

dispatcher = get_dispatcher(__name__)
logger = logging.getLogger(__name__)

FALLBACK_KEY = "convrag_rerank_fallback"
STAGE = "rerank"
ON_ERROR = ("fallback", "raise")


def rank_by_score(scores: Sequence[float], top_n: Optional[int], threshold: Optional[float]) -> List[int]:
    """Indices by descending score (ties keep incoming order), at least ``threshold``, at most ``top_n``."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    if threshold is not None:
        order = [i for i in order if scores[i] >= threshold]
    return order if top_n is None else order[:top_n]


def batched(items: Sequence[str], size: int) -> List[Sequence[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class ModelRerank(BaseNodePostprocessor, PromptMixin):
    """Rerank nodes with a :class:`Scorer` (embedding, HTTP rerank API, LLM, cross-encoder)."""

    scorer: Scorer = Field(exclude=True, description="Scores (query, passage) pairs; higher is better.")
    top_n: Optional[int] = Field(default=None, description="Nodes to keep after reranking; None keeps all.")
    score_threshold: Optional[float] = Field(default=None, description="Drop nodes whose new score is lower.")
    batch_size: int = Field(default=32, description="Passages per scorer call.")
    max_length: Optional[int] = Field(
        default=None, description="Characters of each passage sent to the scorer; None sends the whole text."
    )
    metadata_mode: MetadataMode = Field(default=MetadataMode.NONE, description="Metadata included in passages.")
    on_error: str = Field(default="fallback", description="'fallback' keeps the incoming order; 'raise' re-raises.")

    def __init__(
        self,
        scorer: Scorer,
        *,
        top_n: Optional[int] = None,
        score_threshold: Optional[float] = None,
        batch_size: int = 32,
        max_length: Optional[int] = None,
        metadata_mode: MetadataMode = MetadataMode.NONE,
        on_error: str = "fallback",
    ) -> None:
        if not isinstance(scorer, Scorer):
            raise ArgumentTypeError(f"scorer must be a Scorer (score/ascore), got {type(scorer).__name__}")
        if top_n is not None and top_n < 1:
            raise ConfigurationError(f"top_n must be >= 1 or None (keep all), got {top_n!r}")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size!r}")
        if max_length is not None and max_length < 1:
            raise ConfigurationError(f"max_length must be >= 1 characters or None (whole text), got {max_length!r}")
        if on_error not in ON_ERROR:
            raise ConfigurationError(f"on_error must be one of {list(ON_ERROR)}, got {on_error!r}")
        super().__init__(
            scorer=scorer, top_n=top_n, score_threshold=score_threshold, batch_size=batch_size,
            max_length=max_length, metadata_mode=metadata_mode, on_error=on_error,
        )

    @classmethod
    def from_defaults(
        cls,
        scorer: Optional[Scorer] = None,
        *,
        embed_model: Optional[BaseEmbedding] = None,
        top_n: Optional[int] = None,
        score_threshold: Optional[float] = None,
        batch_size: int = 32,
        max_length: Optional[int] = None,
        metadata_mode: MetadataMode = MetadataMode.NONE,
        on_error: str = "fallback",
    ) -> "ModelRerank":
        """Offline default: the embedding scorer over full chunk text with ``embed_model`` (local MiniLM if None)."""
        if scorer is None:
            scorer = EmbeddingScorer.from_defaults(embed_model)
        elif embed_model is not None:
            raise ConfigurationError("pass either scorer or embed_model (used only to build the default scorer), not both")
        return cls(scorer, top_n=top_n, score_threshold=score_threshold, batch_size=batch_size,
                   max_length=max_length, metadata_mode=metadata_mode, on_error=on_error)

    @classmethod
    def class_name(cls) -> str:
        return "ModelRerank"

    def _get_prompt_modules(self) -> PromptMixinType:
        return {"scorer": self.scorer} if isinstance(self.scorer, PromptMixin) else {}

    # pure helpers shared by the twins ----------------------------------------------------------------
    def _query(self, query_bundle: Optional[QueryBundle]) -> str:
        if query_bundle is None:
            raise ConfigurationError("ModelRerank needs the query: pass query_bundle or query_str")
        return query_bundle.query_str

    def _texts(self, nodes: Sequence[NodeWithScore]) -> List[str]:
        texts = [n.node.get_content(metadata_mode=self.metadata_mode) for n in nodes]
        return texts if self.max_length is None else [t[: self.max_length] for t in texts]

    def _ranked(self, nodes: Sequence[NodeWithScore], scores: Sequence[float]) -> List[NodeWithScore]:
        out = []
        for rank, i in enumerate(rank_by_score(scores, self.top_n, self.score_threshold), start=1):
            prev = nodes[i]
            prev.node.metadata.pop(FALLBACK_KEY, None)
            nws = NodeWithScore(node=prev.node, score=scores[i])
            add_stage(nws, STAGE, rank, scores[i], scorer=self.scorer.name, prev_rank=i + 1, prev_score=prev.score)
            out.append(nws)
        return out

    def _fallback(self, nodes: Sequence[NodeWithScore], exc: Exception) -> List[NodeWithScore]:
        error = f"{type(exc).__name__}: {exc}"
        logger.warning("rerank with %s failed, keeping the incoming order of %d nodes: %s",
                       self.scorer.name, len(nodes), error)
        dispatcher.event(RerankFallbackEvent(scorer=self.scorer.name, error=error, num_nodes=len(nodes)))
        kept = nodes if self.top_n is None else nodes[: self.top_n]
        out = []
        for rank, prev in enumerate(kept, start=1):
            nws = NodeWithScore(node=prev.node, score=prev.score)
            nws.node.metadata[FALLBACK_KEY] = error
            hide_key(nws.node, FALLBACK_KEY)
            add_stage(nws, STAGE, rank, prev.score, scorer=self.scorer.name, prev_rank=rank, prev_score=prev.score,
                      fallback=True)
            out.append(nws)
        return out

    def _begin(self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle]) -> List[Sequence[str]]:
        top_n = len(nodes) if self.top_n is None else self.top_n
        dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=top_n, model_name=self.scorer.name))
        return batched(self._texts(nodes), self.batch_size)

    def _end(
        self,
        nodes: List[NodeWithScore],
        batches: List[Sequence[str]],
        results: Optional[List[List[float]]],
        error: Optional[Exception],
    ) -> List[NodeWithScore]:
        """Ranked nodes from the per-batch scores, or the fallback when scoring failed or returned junk."""
        if error is None:
            assert results is not None
            try:
                scores = [s for b, r in zip(batches, results) for s in check_scores(r, len(b), self.scorer.name)]
            except Exception as exc:
                error = exc
        if error is not None:
            if self.on_error == "raise":
                raise error
            result = self._fallback(nodes, error)
        else:
            result = self._ranked(nodes, scores)
        dispatcher.event(ReRankEndEvent(nodes=result))
        return result

    # postprocessor API -----------------------------------------------------------------------------
    def _postprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        query = self._query(query_bundle)
        if not nodes:
            return []
        batches = self._begin(nodes, query_bundle)
        try:
            results = [self.scorer.score(query, b) for b in batches]
        except Exception as exc:
            return self._end(nodes, batches, None, exc)
        return self._end(nodes, batches, results, None)

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        query = self._query(query_bundle)
        if not nodes:
            return []
        batches = self._begin(nodes, query_bundle)
        try:
            results = list(await asyncio.gather(*(self.scorer.ascore(query, b) for b in batches)))
        except Exception as exc:
            return self._end(nodes, batches, None, exc)
        return self._end(nodes, batches, results, None)
