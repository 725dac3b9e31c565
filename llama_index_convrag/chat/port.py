"""The chat engine's turn port: the only place a turn touches storage.

A turn makes two calls, each with a sync and an async twin:

1. :meth:`TurnPort.load` (before retrieval): read what the turn conditions on and store the user's message as written
   with an empty ``pending`` assistant placeholder, so both ids exist before anything can fail; returns a
   :class:`TurnContext` (history now; it is a dataclass so that more can be loaded in the same call later);
2. :meth:`TurnPort.commit` (after the answer, or when the turn fails or is stopped): one :class:`TurnOutcome` with the
   answer's text and status, its citations and its turn record, written at once.

:class:`StoreTurnPort` implements both over a :class:`~llama_index_convrag.storage.conversation.base.ConversationStore`;
its async twins run the store calls in a worker thread (``asyncio.to_thread``), so the event loop never waits on the
database. A service subclasses it to add its own work to the same two calls (``serve/turn_store.py``: the turn
claim, the owner check, regeneration). Nothing is written anywhere else: a stream that is dropped without being
closed leaves its placeholder ``pending`` until :mod:`~llama_index_convrag.storage.conversation.recovery` (or a
regeneration) finalises it.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from llama_index_convrag.conversational.rewrite import select_history
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.storage.conversation.base import Citation, ConversationStore, Message, in_history
from llama_index_convrag.storage.conversation.sqlite import SQLiteConversationStore


@dataclass(frozen=True)
class TurnRequest:
    """What a turn asks the port to load: the conversation, the user's words, the history window (the last
    ``window`` user turns; None: all) or an explicit ``chat_history`` that replaces the stored one (``[]``
    included), and whether the answer is streamed."""

    conversation_id: str
    question: str
    window: Optional[int] = None
    chat_history: Optional[Sequence[ChatMessage]] = None
    streaming: bool = False


@dataclass
class TurnContext:
    """What :meth:`TurnPort.load` returns: the stored user message and assistant placeholder, and the history the
    turn conditions on (``history_ids``: the stored messages' ids, None for an explicit ``chat_history``)."""

    request: TurnRequest
    user: Message
    placeholder: Message
    history: List[ChatMessage]
    history_ids: Optional[List[str]]


@dataclass(frozen=True)
class TurnOutcome:
    """What :meth:`TurnPort.commit` writes: the answer (``content``, final ``status``, ``error`` text), its citations
    and the turn record (a JSON-ready dict), for the placeholder ``message_id``."""

    conversation_id: str
    message_id: str
    content: str
    status: str
    error: Optional[str]
    citations: Tuple[Citation, ...]
    record: Dict[str, Any]


class TurnPort(ABC):
    """Loads and commits turns (see the module docstring). Implement :meth:`load` and :meth:`commit`; the async
    twins run them in a worker thread unless overridden."""

    @property
    @abstractmethod
    def store(self) -> ConversationStore:
        """The store behind the port (``engine.store``: reads such as ``get_citations``)."""

    @abstractmethod
    def load(self, request: TurnRequest) -> TurnContext:
        """Read the history and store the user message and the ``pending`` placeholder."""

    @abstractmethod
    def commit(self, outcome: TurnOutcome) -> None:
        """Write the answer, its citations and its record; finalise the placeholder."""

    async def aload(self, request: TurnRequest) -> TurnContext:
        """Async twin of :meth:`load` (in a worker thread)."""
        return await asyncio.to_thread(self.load, request)

    async def acommit(self, outcome: TurnOutcome) -> None:
        """Async twin of :meth:`commit` (in a worker thread)."""
        await asyncio.to_thread(self.commit, outcome)


class StoreTurnPort(TurnPort):
    """The port over a conversation store: :meth:`load` reads the history window and calls
    ``store.begin_turn``; :meth:`commit` calls ``store.finish_turn`` (one transaction on the SQL stores)."""

    def __init__(self, store: ConversationStore) -> None:
        if not isinstance(store, ConversationStore):
            raise ArgumentTypeError(f"store must be a ConversationStore, got {type(store).__name__}: {store!r}")
        self._store = store

    @property
    def store(self) -> ConversationStore:
        return self._store

    def load(self, request: TurnRequest) -> TurnContext:
        history, ids = self._history(request)
        user, placeholder = self._store.begin_turn(request.conversation_id, request.question)
        return TurnContext(request, user, placeholder, history, ids)

    def commit(self, outcome: TurnOutcome) -> None:
        self._store.finish_turn(outcome.conversation_id, outcome.message_id, content=outcome.content,
                                status=outcome.status, error=outcome.error, citations=outcome.citations,
                                record=outcome.record)

    def _history(self, request: TurnRequest,
                 messages: Optional[List[Message]] = None) -> Tuple[List[ChatMessage], Optional[List[str]]]:
        """``(history, ids)`` for ``request``: its explicit ``chat_history``, else the stored window (of
        ``messages`` when given: the conversation as read)."""
        if request.chat_history is not None:
            return list(request.chat_history), None
        stored = windowed(messages if messages is not None else self._conversation(request), request.window)
        return [m.to_chat_message() for m in stored], [m.id for m in stored]

    def _conversation(self, request: TurnRequest) -> List[Message]:
        return self._store.get_conversation(request.conversation_id)


def windowed(messages: Sequence[Message], last_n_turns: Optional[int]) -> List[Message]:
    """The history messages (``in_history``) of ``messages`` (a conversation, oldest first) cut to their last
    ``last_n_turns`` user turns (None: all), read from the newest backwards: the cost follows the window, not the
    length of the conversation."""
    if last_n_turns is None:
        return [m for m in messages if in_history(m)]
    if last_n_turns == 0:
        return []
    recent: List[Message] = []
    users = 0
    for m in reversed(messages):
        if not in_history(m):
            continue
        recent.append(m)
        if m.role == MessageRole.USER:
            users += 1
            if users == last_n_turns:
                break
    recent.reverse()
    return [recent[i] for i in select_history(recent, last_n_turns)]  # type: ignore[arg-type]


def turn_port(value: Any) -> TurnPort:
    """The port for ``conversation_store=``: a :class:`TurnPort` as it is, a ``ConversationStore`` behind a
    :class:`StoreTurnPort`, None: an in-memory SQLite store."""
    if isinstance(value, TurnPort):
        return value
    if value is None:
        return StoreTurnPort(SQLiteConversationStore(":memory:"))
    if isinstance(value, ConversationStore):
        return StoreTurnPort(value)
    raise ConfigurationError(f"conversation_store must be a ConversationStore, a TurnPort or None, got "
                             f"{type(value).__name__}: {value!r}")


__all__ = ["StoreTurnPort", "TurnContext", "TurnOutcome", "TurnPort", "TurnRequest", "turn_port", "windowed"]
