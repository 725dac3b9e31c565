"""Instrumentation events of a judge-guided search, emitted while the tree grows.

Each carries ``message_id`` (the chat turn's assistant message id; None outside the chat engine) and the ``path`` of
the question node it belongs to (``"0"`` root, ``"0.3"`` the sub-question of root chunk 3, ...), so a UI can draw the
tree as it grows: graded chunk, sub-question issued, sub-answer attached, search finished.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from llama_index.core.instrumentation.events import BaseEvent


class JudgeChunkGradedEvent(BaseEvent):
    """A chunk was graded (``index``: its position under the question at ``path``)."""

    message_id: Optional[str] = None
    path: str
    index: int
    node_id: str
    grade: int
    reason: str = ""
    follow_up: Optional[str] = None
    error: Optional[str] = None

    @classmethod
    def class_name(cls) -> str:
        return "JudgeChunkGradedEvent"


class JudgeSubQuestionEvent(BaseEvent):
    """A chunk graded 1 led to a sub-question (``path`` is the new question node's path)."""

    message_id: Optional[str] = None
    path: str
    parent_path: str
    node_id: str
    question: str
    depth: int

    @classmethod
    def class_name(cls) -> str:
        return "JudgeSubQuestionEvent"


class JudgeSubAnswerEvent(BaseEvent):
    """The sub-question at ``path`` was answered and the answer attached to its parent chunk ``node_id``."""

    message_id: Optional[str] = None
    path: str
    node_id: str
    question: str
    answer: str

    @classmethod
    def class_name(cls) -> str:
        return "JudgeSubAnswerEvent"


class JudgeSearchEndEvent(BaseEvent):
    """The search finished (``status``: complete, cancelled or error) with what it spent."""

    message_id: Optional[str] = None
    status: str
    stats: Dict[str, Any]

    @classmethod
    def class_name(cls) -> str:
        return "JudgeSearchEndEvent"


__all__ = ["JudgeChunkGradedEvent", "JudgeSearchEndEvent", "JudgeSubAnswerEvent", "JudgeSubQuestionEvent"]
