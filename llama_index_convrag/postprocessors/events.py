"""Typed instrumentation events of the postprocessors (ModelRerank also emits core's ReRankStart/EndEvent)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.schema import NodeWithScore, QueryType


class RerankFallbackEvent(BaseEvent):
    """The scorer failed; the incoming order was kept."""

    scorer: str
    error: str
    num_nodes: int

    @classmethod
    def class_name(cls) -> str:
        return "RerankFallbackEvent"


class NodeSelectionStartEvent(BaseEvent):
    """A selecting postprocessor (MMR, threshold, budget) received ``nodes``."""

    component: str
    query: Optional[QueryType] = None
    nodes: List[NodeWithScore]
    params: Dict[str, Any]

    @classmethod
    def class_name(cls) -> str:
        return "NodeSelectionStartEvent"


class NodeSelectionEndEvent(BaseEvent):
    """A selecting postprocessor kept ``nodes`` and dropped ``num_dropped``."""

    component: str
    nodes: List[NodeWithScore]
    num_dropped: int
    details: Dict[str, Any] = {}

    @classmethod
    def class_name(cls) -> str:
        return "NodeSelectionEndEvent"
