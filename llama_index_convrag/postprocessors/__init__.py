"""Node postprocessors: model rerank, MMR, score thresholds and budgeted coverage selection."""

from llama_index_convrag.postprocessors.budgeted import BudgetedCoverageSelector, BudgetedSelection, greedy_budgeted
from llama_index_convrag.postprocessors.events import (
    NodeSelectionEndEvent,
    NodeSelectionStartEvent,
    RerankFallbackEvent,
)
from llama_index_convrag.postprocessors.mmr import MMRPostprocessor, mmr_select
from llama_index_convrag.postprocessors.model_rerank import FALLBACK_KEY, ModelRerank
from llama_index_convrag.postprocessors.scorers import (
    CrossEncoderScorer,
    EmbeddingScorer,
    HTTPRerankScorer,
    LLMScorer,
    RerankHTTPError,
    Scorer,
    ScorerError,
)
from llama_index_convrag.postprocessors.threshold import SimilarityThreshold

__all__ = [
    "FALLBACK_KEY",
    "BudgetedCoverageSelector",
    "BudgetedSelection",
    "CrossEncoderScorer",
    "EmbeddingScorer",
    "HTTPRerankScorer",
    "LLMScorer",
    "MMRPostprocessor",
    "ModelRerank",
    "NodeSelectionEndEvent",
    "NodeSelectionStartEvent",
    "RerankFallbackEvent",
    "RerankHTTPError",
    "Scorer",
    "ScorerError",
    "SimilarityThreshold",
    "greedy_budgeted",
    "mmr_select",
]
