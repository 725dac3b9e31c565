"""Memory for long conversations: episodic recall of earlier messages (``episodic``, ranked by ``rules``), the running
summary (``summary``; no-LLM ``salient``), user facts (``facts``), and the options that turn each on (``options``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "EpisodicMemory": "episodic",
    "EpisodicOptions": "options",
    "FactDecision": "facts",
    "FactsOptions": "options",
    "FoldResult": "summary",
    "MemoryOptions": "options",
    "MemoryUnit": "units",
    "Recall": "units",
    "RecallRules": "rules",
    "RecalledUnit": "units",
    "RunningSummary": "summary",
    "SummaryOptions": "options",
    "UserFacts": "facts",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.memory.episodic import EpisodicMemory
    from llama_index_convrag.memory.facts import FactDecision, UserFacts
    from llama_index_convrag.memory.options import EpisodicOptions, FactsOptions, MemoryOptions, SummaryOptions
    from llama_index_convrag.memory.rules import RecallRules
    from llama_index_convrag.memory.summary import FoldResult, RunningSummary
    from llama_index_convrag.memory.units import MemoryUnit, Recall, RecalledUnit
