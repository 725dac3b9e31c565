"""The chat engine's turn port: the only place a turn touches storage.

A turn makes two calls, each with a sync and an async twin:

1. :meth:`TurnPort.load` (before retrieval): read what the turn conditions on and store the user's message as written
   with an empty ``pending`` assistant placeholder, so both ids exist before anything can fail; returns a
   :class:`TurnContext`: the history and, when the port has a memory (``bind_memory``) and the request asks for it,
   the turn's memory (the conversation's summary, the owner's facts, where the recent window starts:
   :class:`~llama_index_convrag.memory.conversation.LoadedMemory`), read in the same call;
2. :meth:`TurnPort.commit` (after the answer, or when the turn fails or is stopped): one :class:`TurnOutcome` with the
   answer's text and status, its citations and its turn record, written at once; then the turn's memory writes are
   queued (``ConversationMemory.schedule``: they run in the memory's background writer, so the commit does not wait
   for them).

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
from llama_index_convrag.memory.conversation import ConversationMemory, LoadedMemory
from llama_index_convrag.storage.conversation._sql import DEFAULT_OWNER
from llama_index_convrag.storage.conversation.base import Citation, ConversationStore, Message, in_history
from llama_index_convrag.storage.conversation.sqlite import SQLiteConversationStore


@dataclass(frozen=True)
class TurnRequest:
    """What a turn asks the port to load: the conversation, the user's words, the history window (the last
    ``window`` user turns; None: all) or an explicit ``chat_history`` that replaces the stored one (``[]``
    included), whether the answer is streamed, whose turn it is (``owner``: memory rows are read and written as
    theirs) and whether to load its memory."""

    conversation_id: str
    question: str
    window: Optional[int] = None
    chat_history: Optional[Sequence[ChatMessage]] = None
    streaming: bool = False
    owner: str = DEFAULT_OWNER
    memory: bool = False


@dataclass
class TurnContext:
    """What :meth:`TurnPort.load` returns: the stored user message and assistant placeholder, the history the turn
    conditions on (``history_ids``: the stored messages' ids, None for an explicit ``chat_history``) and its memory
    (None: not asked for, or a port without memory)."""

    request: TurnRequest
    user: Message
    placeholder: Message
    history: List[ChatMessage]
    history_ids: Optional[List[str]]
    memory: Optional[LoadedMemory] = None


@dataclass(frozen=True)
class TurnOutcome:
    """What :meth:`TurnPort.commit` writes: the answer (``content``, final ``status``, ``error`` text), its citations
    and the turn record (a JSON-ready dict), for the placeholder ``message_id``; ``owner`` and ``user_message_id``
    name the turn for its memory writes."""

    conversation_id: str
    message_id: str
    content: str
    status: str
    error: Optional[str]
    citations: Tuple[Citation, ...]
    record: Dict[str, Any]
    owner: str = DEFAULT_OWNER
    user_message_id: Optional[str] = None


class TurnPort(ABC):
    """Loads and commits turns (see the module docstring). Implement :meth:`load` and :meth:`commit`; the async
    twins run them in a worker thread unless overridden. A port that loads and writes memory overrides
    :meth:`bind_memory` (:class:`StoreTurnPort` does)."""

    @property
    def memory(self) -> Optional[ConversationMemory]:
        """The memory this port loads and writes (None: none)."""
        return None

    def bind_memory(self, memory: ConversationMemory) -> "TurnPort":
        """Load and write ``memory`` in this port's two calls (the engine binds its own); this port cannot."""
        raise ConfigurationError(f"{type(self).__name__} cannot load memory; subclass StoreTurnPort (it loads and "
                                 "writes memory in its two calls) or build the engine without memory=")

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
    """The port over a conversation store: :meth:`load` reads the history window (and the memory) and calls
    ``store.begin_turn``; :meth:`commit` calls ``store.finish_turn`` (one transaction on the SQL stores), then queues
    the memory writes."""

    def __init__(self, store: ConversationStore, memory: Optional[ConversationMemory] = None) -> None:
        if not isinstance(store, ConversationStore):
            raise ArgumentTypeError(f"store must be a ConversationStore, got {type(store).__name__}: {store!r}")
        self._store = store
        self._memory: Optional[ConversationMemory] = None
        if memory is not None:
            self.bind_memory(memory)

    @property
    def store(self) -> ConversationStore:
        return self._store

    @property
    def memory(self) -> Optional[ConversationMemory]:
        return self._memory

    def bind_memory(self, memory: ConversationMemory) -> "StoreTurnPort":
        if not isinstance(memory, ConversationMemory):
            raise ArgumentTypeError(f"memory must be a ConversationMemory, got {type(memory).__name__}")
        if self._memory is not None and self._memory is not memory:
            raise ConfigurationError("this port loads another memory already; one port, one memory")
        if memory.store is not self._store:
            raise ConfigurationError("the memory keeps its rows in another store than this port's; build "
                                     "ConversationMemory.from_defaults(store=<the port's store>)")
        self._memory = memory
        return self

    def load(self, request: TurnRequest) -> TurnContext:
        messages = self._conversation(request) if request.chat_history is None or self._wants_memory(request) \
            else None
        history, ids = self._history(request, messages)
        user, placeholder = self._store.begin_turn(request.conversation_id, request.question)
        context = TurnContext(request, user, placeholder, history, ids)
        if messages is not None and self._wants_memory(request):
            context.memory = self.load_memory(request, messages, history)
        return context

    def _wants_memory(self, request: TurnRequest) -> bool:
        return request.memory and self._memory is not None

    def load_memory(self, request: TurnRequest, messages: Sequence[Message],
                    history: Sequence[ChatMessage]) -> LoadedMemory:
        """The turn's memory (``messages``: the stored conversation before the turn; a subclass that builds its own
        :class:`TurnContext`, such as a regeneration's, calls this with the messages before the question)."""
        assert self._memory is not None
        return self._memory.load(request.owner, request.conversation_id, messages, history, request.question)

    def commit(self, outcome: TurnOutcome) -> None:
        self._store.finish_turn(outcome.conversation_id, outcome.message_id, content=outcome.content,
                                status=outcome.status, error=outcome.error, citations=outcome.citations,
                                record=outcome.record)
        if self._memory is not None and outcome.user_message_id is not None:
            self._memory.schedule(outcome.owner, outcome.conversation_id, outcome.user_message_id)

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


def turn_port(value: Any, memory: Optional[ConversationMemory] = None) -> TurnPort:
    """The port for ``conversation_store=``: a :class:`TurnPort` as it is, a ``ConversationStore`` behind a
    :class:`StoreTurnPort`, None: an in-memory SQLite store; with ``memory`` bound to it."""
    if isinstance(value, TurnPort):
        return value.bind_memory(memory) if memory is not None else value
    if value is None:
        return StoreTurnPort(SQLiteConversationStore(":memory:"), memory)
    if isinstance(value, ConversationStore):
        return StoreTurnPort(value, memory)
    raise ConfigurationError(f"conversation_store must be a ConversationStore, a TurnPort or None, got "
                             f"{type(value).__name__}: {value!r}")


__all__ = ["StoreTurnPort", "TurnContext", "TurnOutcome", "TurnPort", "TurnRequest", "turn_port", "windowed"]
