"""The conversation store interface: messages with status, citations bound to message ids, and turn records.

A :class:`ConversationStore` is also a LlamaIndex ``BaseChatStore`` (key = conversation id), so the same store can
back core's memories (``ChatMemoryBuffer``, ``ChatSummaryMemoryBuffer``). Citations and turn records live in their own
tables and are never copied into ``ChatMessage.additional_kwargs`` (LlamaIndex forwards those into prompts).

A memory may rewrite the list it keeps under a key (``set_messages`` with a summary in place of old turns,
``delete_messages`` on reset, ``delete_message``): those calls rewrite the conversation's **view** (what
``get_messages`` returns from then on), never the conversation itself, so its messages, citations, turn records,
feedback and owner stay. ``add_message`` appends to the conversation (and to the view, when there is one).
"""

from __future__ import annotations

import time
import uuid
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.storage.chat_store.base import BaseChatStore

from llama_index_convrag.errors import ConversationStoreError

STATUSES = frozenset({"pending", "complete", "error", "cancelled", "interrupted"})
"""``pending``: an assistant placeholder not yet finalised (being generated or streamed); the others are final.
``interrupted``: the process answering it stopped (killed, or its worker's lease lapsed); it keeps the text saved so
far."""
FINAL_STATUSES = frozenset({"complete", "error", "cancelled", "interrupted"})
#: the status of an answer whose process stopped before it finished (see ``recovery.py`` and ``claims.py``)
INTERRUPTED = "interrupted"
#: the error text shown beside ``interrupted``
INTERRUPTED_ERROR = "interrupted: the process answering this turn stopped before it finished"


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Message:
    """One stored message."""

    id: str
    conversation_id: str
    role: str
    content: str
    status: str = "complete"
    error: Optional[str] = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    additional_kwargs: Dict[str, Any] = field(default_factory=dict)
    #: assistant messages: the user message answered (None for older rows and other roles)
    reply_to: Optional[str] = None
    #: 1 for the first answer to ``reply_to``; a regenerated answer is the next version
    version: int = 1
    #: the id of the newer version that replaced this answer (it then leaves the history), or None
    superseded_by: Optional[str] = None

    def to_chat_message(self) -> ChatMessage:
        """A LlamaIndex message (content and the caller's own additional_kwargs only; no citations)."""
        return ChatMessage(role=MessageRole(self.role), content=self.content,
                           additional_kwargs=dict(self.additional_kwargs))


@dataclass
class Citation:
    """One source of an assistant message. ``marker`` is the ``[n]`` the answer cited, or None if uncited."""

    node_id: str
    source_index: int
    marker: Optional[int] = None
    ref_doc_id: Optional[str] = None
    score: Optional[float] = None
    stage_scores: List[Dict[str, Any]] = field(default_factory=list)
    text: str = ""
    #: Where the chunk that matched sits in ``text`` (``[start, end]``) when the answer read it inside a wider passage.
    span: Optional[List[int]] = None

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready copy (what ``dataclasses.asdict`` returns, without its recursive deep copy)."""
        return {"node_id": self.node_id, "source_index": self.source_index, "marker": self.marker,
                "ref_doc_id": self.ref_doc_id, "score": self.score,
                "stage_scores": [dict(s) for s in self.stage_scores], "text": self.text,
                "span": None if self.span is None else list(self.span)}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Citation":
        return cls(**data)


class ConversationStore(BaseChatStore):
    """Abstract store. Backends implement the abstract methods; the ``BaseChatStore`` API comes for free."""

    # --- conversation API ----------------------------------------------------------------------
    @abstractmethod
    def add_messages(self, messages: Sequence[Message]) -> None:
        """Append messages (in order) atomically."""

    @abstractmethod
    def get_conversation(self, conversation_id: str) -> List[Message]:
        """Every message of a conversation, oldest first, whatever its status."""

    @abstractmethod
    def get_message(self, message_id: str) -> Optional[Message]:
        """One message by id, or None."""

    @abstractmethod
    def finalize_message(self, message_id: str, *, content: str, status: str, error: Optional[str] = None) -> None:
        """Set the final content and status of a (placeholder) message."""

    @abstractmethod
    def put_citations(self, message_id: str, citations: Sequence[Citation]) -> None:
        """Replace the citations bound to a message."""

    @abstractmethod
    def get_citations(self, message_id: str) -> List[Citation]:
        """The citations bound to a message, in source order."""

    @abstractmethod
    def put_turn_record(self, conversation_id: str, message_id: str, record: Dict[str, Any]) -> None:
        """Store (or replace) the JSON turn record of the turn answered by ``message_id``."""

    @abstractmethod
    def get_turn_record(self, message_id: str) -> Optional[Dict[str, Any]]:
        """The turn record answered by ``message_id``, or None."""

    @abstractmethod
    def list_turn_records(self, conversation_id: str) -> List[Dict[str, Any]]:
        """Every turn record of a conversation, oldest first."""

    @abstractmethod
    def delete_conversation(self, conversation_id: str) -> List[Message]:
        """Delete a conversation with its citations and records; returns the deleted messages."""

    @abstractmethod
    def list_conversations(self) -> List[str]:
        """Conversation ids, oldest first."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> "ConversationStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        """``with store:`` closes the store on the way out, whatever happened inside."""
        self.close()

    # --- helpers shared by backends ------------------------------------------------------------
    def add_message_text(self, conversation_id: str, role: str, content: str, *, status: str = "complete",
                         additional_kwargs: Optional[Dict[str, Any]] = None) -> Message:
        msg = Message(id=new_id(), conversation_id=conversation_id, role=role, content=content, status=status,
                      additional_kwargs=dict(additional_kwargs or {}))
        self.add_messages([msg])
        return msg

    def begin_turn(self, conversation_id: str, question: str) -> Tuple[Message, Message]:
        """Store the user's message as written and an empty assistant placeholder (status ``pending``)."""
        user = Message(id=new_id(), conversation_id=conversation_id, role="user", content=question)
        placeholder = Message(id=new_id(), conversation_id=conversation_id, role="assistant", content="",
                              status="pending", reply_to=user.id)
        self.add_messages([user, placeholder])
        return user, placeholder

    @abstractmethod
    def begin_regeneration(self, user_message: Message) -> Message:
        """Store a new ``pending`` answer to ``user_message`` (the next version); every earlier answer to it is
        marked superseded by it (kept, readable, out of the history)."""

    def finish_turn(self, conversation_id: str, message_id: str, *, content: str, status: str,
                    error: Optional[str], citations: Sequence[Citation], record: Dict[str, Any]) -> None:
        """Persist an answer's citations and turn record and finalise its message (SQL backends: atomically)."""
        if citations:
            self.put_citations(message_id, citations)
        self.put_turn_record(conversation_id, message_id, record)
        self.finalize_message(message_id, content=content, status=status, error=error)

    def history(self, conversation_id: str) -> List[Message]:
        """The messages to condition on: every non-assistant message, complete answers, and the partial text of
        answers whose stream stopped (``cancelled`` by the reader, ``interrupted`` by a dead process; the user saw it).
        Failed and pending answers are not."""
        return [m for m in self.get_conversation(conversation_id) if in_history(m)]

    # --- BaseChatStore: the conversation's view (see the module docstring) ------------------------------------
    @abstractmethod
    def read_view(self, key: str) -> Optional[List[ChatMessage]]:
        """The view a memory set for ``key``, or None when none was (the view is then the conversation)."""

    @abstractmethod
    def edit_view(self, key: str, edit: Callable[[List[ChatMessage]], List[ChatMessage]]) -> List[ChatMessage]:
        """Atomically replace ``key``'s view by ``edit(current view)``; returns the view it replaced."""

    @abstractmethod
    def append_message(self, message: Message) -> None:
        """Add ``message`` to its conversation and, when the conversation has a view, to the view (atomically)."""

    def get_messages(self, key: str) -> List[ChatMessage]:
        view = self.read_view(key)
        return view if view is not None else [m.to_chat_message() for m in self.get_conversation(key)]

    def set_messages(self, key: str, messages: List[ChatMessage]) -> None:
        given = list(messages)
        self.edit_view(key, lambda current: given)

    def add_message(self, key: str, message: ChatMessage) -> None:
        self.append_message(_from_chat(key, message))

    def delete_messages(self, key: str) -> Optional[List[ChatMessage]]:
        before = self.edit_view(key, lambda current: [])
        return before if before else None

    def delete_message(self, key: str, idx: int) -> Optional[ChatMessage]:
        removed: List[ChatMessage] = []

        def drop(current: List[ChatMessage]) -> List[ChatMessage]:
            if 0 <= idx < len(current):
                removed.append(current[idx])
                return current[:idx] + current[idx + 1:]
            return current

        self.edit_view(key, drop)
        return removed[0] if removed else None

    def delete_last_message(self, key: str) -> Optional[ChatMessage]:
        removed: List[ChatMessage] = []

        def drop(current: List[ChatMessage]) -> List[ChatMessage]:
            removed.extend(current[-1:])
            return current[:-1]

        self.edit_view(key, drop)
        return removed[0] if removed else None


def in_history(message: Message) -> bool:
    """Whether a message is conditioned on (see :meth:`ConversationStore.history`)."""
    if message.superseded_by is not None:
        return False
    return message.role != "assistant" or message.status == "complete" or (
        message.status in ("cancelled", INTERRUPTED) and message.content != "")


def _from_chat(conversation_id: str, message: ChatMessage) -> Message:
    role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
    return Message(id=new_id(), conversation_id=conversation_id, role=role, content=message.content or "",
                   additional_kwargs=dict(message.additional_kwargs))
