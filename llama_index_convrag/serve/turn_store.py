"""The store a served turn's engine writes through.

A served turn does its database work in two calls the server makes (``ServeState.store_call``), so that the engine,
running on the event loop, touches no database in between: :meth:`TurnStore.prepare` reads the conversation and
stores the user message and the assistant placeholder (before retrieval: the ids reach the client at once); the
engine's ``begin_turn`` then answers with that pair and its history read with that snapshot; the engine's
``finish_turn`` is held in memory until :meth:`TurnStore.flush` writes it (or, when the engine never got that far,
finalises the placeholder ``cancelled``).
For a regeneration the answer becomes the next version of an existing user message instead of a new question.

Without ``prepare`` it delegates as it is (``begin_turn`` reports the pair to ``on_begin``; writes go through).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from llama_index_convrag.storage.conversation.base import Citation, Message, in_history

OnBegin = Callable[[Message, Message], None]


@dataclass(frozen=True)
class Finished:
    """The answer the engine finished with (``finish_turn``'s arguments), as written by :meth:`TurnStore.flush`."""

    content: str
    status: str
    error: Optional[str]
    citations: Sequence[Citation]


class TurnStore:
    """Delegates to ``inner``; ``begin_turn`` calls ``on_begin(user, placeholder)``. With ``regenerate`` (a stored
    user message) the engine sees the conversation up to before that message and the answer becomes its next
    version. See the module docstring for :meth:`prepare` / :meth:`flush`."""

    def __init__(self, inner: Any, on_begin: Optional[OnBegin] = None, regenerate: Optional[Message] = None) -> None:
        self._inner, self._on_begin, self._regenerate = inner, on_begin, regenerate
        self._snapshot: Optional[List[Message]] = None
        self._snapshot_of: Optional[str] = None
        self._begun: Optional[Tuple[Message, Message]] = None
        self._prepared = False
        self._held: Optional[Dict[str, Any]] = None
        self.finished: Optional[Finished] = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    # --- the server's two calls (store calls) -----------------------------------------------------------------
    def prepare(self, conversation_id: str, question: str) -> Tuple[Message, Message]:
        """Read the conversation, then store the turn (the user message and the placeholder): ``(user,
        placeholder)``. The engine's next ``begin_turn`` returns this pair and its history read this snapshot."""
        self._snapshot, self._snapshot_of = self._inner.get_conversation(conversation_id), conversation_id
        self._begun = self._store_turn(conversation_id, question)
        self._prepared = True
        return self._begun

    def flush(self) -> Finished:
        """Write the held ``finish_turn``, or finalise the placeholder ``cancelled`` (no text) when the engine never
        finished the turn; what was written. Once: later calls return the same."""
        if self.finished is not None:
            return self.finished
        assert self._begun is not None, "flush() after prepare()"
        held = self._held
        if held is None:
            self._inner.finalize_message(self._begun[1].id, content="", status="cancelled")
            self.finished = Finished(content="", status="cancelled", error=None, citations=())
        else:
            self._inner.finish_turn(**held)
            self.finished = Finished(content=held["content"], status=held["status"], error=held["error"],
                                     citations=tuple(held["citations"]))
        return self.finished

    # --- what the engine calls --------------------------------------------------------------------------------
    def begin_turn(self, conversation_id: str, question: str) -> Tuple[Message, Message]:
        if self._prepared and self._snapshot is not None:
            assert self._begun is not None
            self._snapshot = None  # later reads see the stored turn
            return self._begun
        user, placeholder = self._store_turn(conversation_id, question)
        if self._on_begin is not None:
            self._on_begin(user, placeholder)
        return user, placeholder

    def finish_turn(self, conversation_id: str, message_id: str, *, content: str, status: str,
                    error: Optional[str], citations: Sequence[Citation], record: Dict[str, Any]) -> None:
        kwargs = dict(conversation_id=conversation_id, message_id=message_id, content=content, status=status,
                      error=error, citations=list(citations), record=record)
        if self._prepared:
            if self._held is None:
                self._held = kwargs
            return
        self._inner.finish_turn(**kwargs)

    def get_conversation(self, conversation_id: str) -> List[Message]:
        messages = (self._snapshot if self._snapshot is not None and conversation_id == self._snapshot_of
                    else self._inner.get_conversation(conversation_id))
        if self._regenerate is None:
            return messages
        ids = [m.id for m in messages]
        return messages[:ids.index(self._regenerate.id)] if self._regenerate.id in ids else messages

    def history(self, conversation_id: str) -> List[Message]:
        return [m for m in self.get_conversation(conversation_id) if in_history(m)]

    def _store_turn(self, conversation_id: str, question: str) -> Tuple[Message, Message]:
        if self._regenerate is None:
            return self._inner.begin_turn(conversation_id, question)
        return self._regenerate, self._inner.begin_regeneration(self._regenerate)
