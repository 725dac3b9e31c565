"""Node postprocessors: model rerank, MMR, score thresholds and budgeted coverage selection.

The rerank scorers are in :mod:`llama_index_convrag.postprocessors.scorers`; errors in
:mod:`llama_index_convrag.errors`.
"""

from llama_index_convrag.postprocessors.budgeted import BudgetedCoverageSelector, BudgetedSelection, greedy_budgeted
from llama_index_convrag.postprocessors.events import (
    NodeSelectionEndEvent,
    NodeSelectionStartEvent,
    RerankFallbackEvent,
)
from llama_index_convrag.postprocessors.mmr import MMRPostprocessor, mmr_select
from llama_index_convrag.postprocessors.model_rerank import FALLBACK_KEY, ModelRerank
from llama_index_convrag.postprocessors.threshold import SimilarityThreshold

__all__ = [
    "FALLBACK_KEY",
    "BudgetedCoverageSelector",
    "BudgetedSelection",
    "MMRPostprocessor",
    "ModelRerank",
    "NodeSelectionEndEvent",
    "NodeSelectionStartEvent",
    "RerankFallbackEvent",
    "SimilarityThreshold",
    "greedy_budgeted",
    "mmr_select",
]
