"""Instrumentation events emitted during a chat turn."""

from __future__ import annotations

from typing import Any, Dict, Optional

from llama_index.core.instrumentation.events import BaseEvent


class ChatTurnStartEvent(BaseEvent):
    conversation_id: str
    user_message_id: str
    assistant_message_id: str
    question: str

    @classmethod
    def class_name(cls) -> str:
        return "ChatTurnStartEvent"


class QuestionRewriteEvent(BaseEvent):
    question: str
    retrieval_query: str
    strategy: str
    used_llm: bool
    latency_ms: float
    fallback_reason: Optional[str] = None
    skipped_reason: Optional[str] = None
    explanation: Optional[Dict[str, Any]] = None

    @classmethod
    def class_name(cls) -> str:
        return "QuestionRewriteEvent"


class ContextTrimEvent(BaseEvent):
    report: Dict[str, Any]

    @classmethod
    def class_name(cls) -> str:
        return "ContextTrimEvent"


class ChatTurnEndEvent(BaseEvent):
    assistant_message_id: str
    status: str
    error: Optional[str] = None

    @classmethod
    def class_name(cls) -> str:
        return "ChatTurnEndEvent"


__all__ = ["ChatTurnEndEvent", "ChatTurnStartEvent", "ContextTrimEvent", "QuestionRewriteEvent"]
