"""Memory for long conversations: episodic recall of earlier messages (``episodic``, ranked by ``rules``), the running
summary (``summary``; no-LLM ``salient``), user facts (``facts``), a core ``Memory``'s blocks (``core_blocks``), the
options that turn each on (``options``), and what a turn calls (``conversation``: ``ConversationMemory``; its writes
run on ``writer``'s ``BackgroundWriter``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "BackgroundWriter": "writer",
    "ConversationMemory": "conversation",
    "CoreBlocks": "core_blocks",
    "EpisodicMemory": "episodic",
    "EpisodicOptions": "options",
    "FactDecision": "facts",
    "FactsOptions": "options",
    "FoldResult": "summary",
    "LoadedMemory": "conversation",
    "MemoryOptions": "options",
    "MemoryUnit": "units",
    "Recall": "units",
    "RecallRules": "rules",
    "RecalledUnit": "units",
    "RunningSummary": "summary",
    "SummaryOptions": "options",
    "TurnWrites": "conversation",
    "UserFacts": "facts",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.memory.conversation import ConversationMemory, LoadedMemory, TurnWrites
    from llama_index_convrag.memory.core_blocks import CoreBlocks
    from llama_index_convrag.memory.writer import BackgroundWriter
    from llama_index_convrag.memory.episodic import EpisodicMemory
    from llama_index_convrag.memory.facts import FactDecision, UserFacts
    from llama_index_convrag.memory.options import EpisodicOptions, FactsOptions, MemoryOptions, SummaryOptions
    from llama_index_convrag.memory.rules import RecallRules
    from llama_index_convrag.memory.summary import FoldResult, RunningSummary
    from llama_index_convrag.memory.units import MemoryUnit, Recall, RecalledUnit
