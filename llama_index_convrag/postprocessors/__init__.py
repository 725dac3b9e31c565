"""Node postprocessors: model rerank, MMR, score thresholds, budgeted coverage selection and widening hits to their
neighbouring chunks.

The rerank scorers are in :mod:`llama_index_convrag.postprocessors.scorers`; errors in
:mod:`llama_index_convrag.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "BudgetedCoverageSelector": "budgeted",
    "BudgetedSelection": "budgeted",
    "greedy_budgeted": "budgeted",
    "NodeSelectionEndEvent": "events",
    "NodeSelectionStartEvent": "events",
    "RerankFallbackEvent": "events",
    "MMRPostprocessor": "mmr",
    "mmr_select": "mmr",
    "FALLBACK_KEY": "model_rerank",
    "ModelRerank": "model_rerank",
    "SimilarityThreshold": "threshold",
    "NeighbourWidener": "widen",
    "WidenRules": "widen",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.postprocessors.budgeted import BudgetedCoverageSelector, BudgetedSelection, greedy_budgeted
    from llama_index_convrag.postprocessors.events import (
        NodeSelectionEndEvent,
        NodeSelectionStartEvent,
        RerankFallbackEvent,
    )
    from llama_index_convrag.postprocessors.mmr import MMRPostprocessor, mmr_select
    from llama_index_convrag.postprocessors.model_rerank import FALLBACK_KEY, ModelRerank
    from llama_index_convrag.postprocessors.threshold import SimilarityThreshold
    from llama_index_convrag.postprocessors.widen import NeighbourWidener, WidenRules
