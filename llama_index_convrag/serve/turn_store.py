"""The turn port of one served turn: the engine's own port (``chat/port.py``), with the service's work added to the
same two calls.

:meth:`ServedTurn.load` is the turn's first store call: the route's check when it gives one (its 4xx; the served
routes read the key, the owner and the knowledge base in a store call before, since the knowledge base chooses the
engine), the turn claim (one turn in flight per conversation, else 409; held by the process's worker under its lease),
an answer a dead worker left ``pending`` there marked ``interrupted``, work that needs the claim, then what every
turn loads (the history window; the user message and the assistant placeholder stored, so the ids reach the client
before retrieval). While the answer streams, :meth:`ServedTurn.aprogress` saves its text so far at most every
``limits.partial_save_s`` (what a crash keeps).
For a regeneration the history (and the memory's recent window) ends before the regenerated user message and the
placeholder is its next answer version. :meth:`ServedTurn.commit` is the second: the answer, its citations and its record, and the claim released.
Both run where ``ServeState.store_call`` says (on the loop for SQLite, in the thread pool otherwise).
:meth:`ServedTurn.close` finalises a placeholder the engine never committed (the client went away first) as
``cancelled`` and releases the claim; it makes no store call when the turn was committed.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, List, Optional

from llama_index_convrag.chat.port import StoreTurnPort, TurnContext, TurnOutcome, TurnRequest
from llama_index_convrag.serve.errors import APIError
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.storage.conversation.base import Message
from llama_index_convrag.storage.conversation.claims import holds_pending


class ServedTurn(StoreTurnPort):
    """The port of one served turn (see the module docstring). ``check`` raises the route's 4xx; ``claimed`` runs
    holding the claim; ``regenerate``: the stored user message whose answer is regenerated."""

    def __init__(self, state: ServeState, *, check: Optional[Callable[[], None]] = None,
                 claimed: Optional[Callable[[], None]] = None, regenerate: Optional[Message] = None) -> None:
        super().__init__(state.store)
        self._state, self._check, self._claimed, self._regenerate = state, check, claimed, regenerate
        self._lock = threading.Lock()
        self._conversation_id: Optional[str] = None  # claimed, not yet released
        self._read: Optional[List[Message]] = None  # the conversation as the load read it (during the load only)
        #: ``time.monotonic()`` from which the next partial save is due (the load counts as a save: nothing to save
        #: yet); a stream compares it per delta, without a call
        self.save_due_at = time.monotonic() + state.limits.partial_save_s
        #: what the load stored (set once it succeeded)
        self.context: Optional[TurnContext] = None
        #: what was written last: the engine's outcome, or ``cancelled`` (:meth:`close`)
        self.committed: Optional[TurnOutcome] = None

    def load(self, request: TurnRequest) -> TurnContext:
        if self._check is not None:
            self._check()
        cid, worker = request.conversation_id, self._state.worker_id
        ttl = self._state.limits.lease_s if worker is not None else self._state.limits.turn_timeout_s
        if not self.store.claim_turn(cid, ttl, worker):
            raise APIError(409, "turn_in_flight", f"conversation {cid!r} is answering another turn; wait for its "
                                                  "done/error event (or cancel it) and retry")
        self._conversation_id = cid
        try:
            messages: Optional[List[Message]] = self.store.get_conversation(cid)
            if holds_pending(messages):  # holding the claim, no live turn answers it: its worker died
                self.store.interrupt_pending([cid])
                messages = None
            if self._claimed is not None:
                self._claimed()
                messages = None  # what it did may have changed the conversation
            self._read = messages  # the conversation as read: the history below reads it, not the store again
            self.context = self._regeneration(request) if self._regenerate is not None else super().load(request)
        except BaseException:
            self._release()
            raise
        finally:
            self._read = None
        return self.context

    def _conversation(self, request: TurnRequest) -> List[Message]:
        if self._read is not None and request.conversation_id == self._conversation_id:
            return self._read
        return super()._conversation(request)

    def _regeneration(self, request: TurnRequest) -> TurnContext:
        """The conversation before the regenerated user message as history; the placeholder is its next answer."""
        user = self._regenerate
        assert user is not None
        messages = self._conversation(request)
        ids = [m.id for m in messages]
        before = messages[:ids.index(user.id)] if user.id in ids else messages
        history, history_ids = self._history(request, before)
        context = TurnContext(request, user, self.store.begin_regeneration(user), history, history_ids)
        if self._wants_memory(request):
            context.memory = self.load_memory(request, before, history)
        return context

    def commit(self, outcome: TurnOutcome) -> None:
        with self._lock:
            if self.committed is not None:
                return
            try:
                super().commit(outcome)
                self.committed = outcome
            finally:
                self._release()

    def close(self) -> Optional[TurnOutcome]:
        """Finalise the placeholder ``cancelled`` (no text) unless the turn was committed, and release the claim;
        what was written (None when nothing was loaded). Once: later calls return the same."""
        with self._lock:
            if self.committed is None and self.context is not None:
                placeholder = self.context.placeholder
                try:
                    self.store.finalize_message(placeholder.id, content="", status="cancelled")
                    self.committed = TurnOutcome(placeholder.conversation_id, placeholder.id, "", "cancelled", None,
                                                 (), {})
                finally:
                    self._release()
            else:
                self._release()
            return self.committed

    def progress_due(self) -> bool:
        """Whether :meth:`aprogress` would save now (a loaded, uncommitted turn, ``limits.partial_save_s`` since the
        last save)."""
        return time.monotonic() >= self.save_due_at and self.context is not None and self.committed is None

    async def aprogress(self, parts: List[str]) -> None:
        """The answer's text so far (its streamed pieces), as it streams: saved into the placeholder when
        :meth:`progress_due` (a store call then; none otherwise)."""
        if not self.progress_due():
            return
        self.save_due_at = time.monotonic() + self._state.limits.partial_save_s
        placeholder = self.context.placeholder
        await self._state.store_call(self.store.save_partial, placeholder.conversation_id, placeholder.id,
                                     "".join(parts))

    async def aload(self, request: TurnRequest) -> TurnContext:
        return await self._state.store_call(self.load, request)

    async def acommit(self, outcome: TurnOutcome) -> None:
        await self._state.store_call(self.commit, outcome)

    async def aclose(self) -> Optional[TurnOutcome]:
        """Async twin of :meth:`close` (no store call when the turn was committed)."""
        if self.committed is not None and self._conversation_id is None:
            return self.committed
        return await self._state.store_call(self.close)

    def _release(self) -> None:
        if self._conversation_id is not None:
            cid, self._conversation_id = self._conversation_id, None
            self.store.release_turn(cid, self._state.worker_id)


__all__ = ["ServedTurn"]
