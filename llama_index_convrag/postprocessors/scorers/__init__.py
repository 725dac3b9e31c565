"""Pluggable relevance scorers for :class:`~llama_index_convrag.postprocessors.model_rerank.ModelRerank`.

Their errors (``ScorerError``, ``RerankHTTPError``) are in :mod:`llama_index_convrag.errors`."""

from llama_index_convrag.postprocessors.scorers.base import Scorer, check_scores
from llama_index_convrag.postprocessors.scorers.cross_encoder import CrossEncoderScorer
from llama_index_convrag.postprocessors.scorers.embedding import EmbeddingScorer
from llama_index_convrag.postprocessors.scorers.http import HTTPRerankScorer
from llama_index_convrag.postprocessors.scorers.llm import LLMScorer

__all__ = [
    "CrossEncoderScorer",
    "EmbeddingScorer",
    "HTTPRerankScorer",
    "LLMScorer",
    "Scorer",
    "check_scores",
]
