"""Pluggable relevance scorers for :class:`~llama_index_convrag.postprocessors.model_rerank.ModelRerank`.

Their errors (``ScorerError``, ``RerankHTTPError``) are in :mod:`llama_index_convrag.errors`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "Scorer": "base",
    "check_scores": "base",
    "CrossEncoderScorer": "cross_encoder",
    "EmbeddingScorer": "embedding",
    "HTTPRerankScorer": "http",
    "LLMScorer": "llm",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.postprocessors.scorers.base import Scorer, check_scores
    from llama_index_convrag.postprocessors.scorers.cross_encoder import CrossEncoderScorer
    from llama_index_convrag.postprocessors.scorers.embedding import EmbeddingScorer
    from llama_index_convrag.postprocessors.scorers.http import HTTPRerankScorer
    from llama_index_convrag.postprocessors.scorers.llm import LLMScorer
