"""Turn claims: one turn in flight per conversation, across processes, held by a worker under a lease.

A claim is a conversation row's ``busy_until`` (and ``claimed_by``, the worker holding it): free when ``busy_until``
is NULL or past. A worker registers (:meth:`ClaimsMixin.register_worker`) under a name that survives its restarts
(for example ``host:port``) and renews its lease every few seconds (:meth:`~ClaimsMixin.renew_worker`), which
extends every claim it holds; so a worker that dies leaves claims that lapse within one lease, and a worker that
restarts under the same name frees its earlier self's claims at once. A claim made without a worker lasts its
``ttl_s`` and is never renewed.

What a turn in flight leaves when its worker dies: its ``pending`` placeholder, with the text the worker saved as it
streamed (:meth:`ClaimsMixin.save_partial`, a conditional write that never touches a final answer). Releasing a dead
worker's claims marks the placeholders of those conversations ``interrupted`` in the same transaction (the text
kept), and a worker that takes a conversation's claim marks any placeholder still ``pending`` there the same way
(:meth:`~ClaimsMixin.interrupt_pending`: holding the claim, no other turn can be answering it).

A mixin of :class:`~._sql.SQLConversationStore` (SQLite and PostgreSQL alike). Each call is one transaction.
"""

from __future__ import annotations

import secrets
import time
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.storage.conversation.accounts import Run
from llama_index_convrag.storage.conversation.base import INTERRUPTED, INTERRUPTED_ERROR, Message


@dataclass(frozen=True)
class Worker:
    """A registered worker: its id (new at every start), the name it registered under and its lease's end."""

    id: str
    name: str
    started_at: float
    lease_until: float


def _check_lease(lease_s: float) -> float:
    if not lease_s > 0:
        raise ConfigurationError(f"lease_s must be > 0 seconds, got {lease_s!r}")
    return lease_s


def holds_pending(messages: Sequence[Message]) -> bool:
    """Whether ``messages`` (a conversation) hold a ``pending`` answer."""
    return any(m.role == "assistant" and m.status == "pending" for m in messages)


class ClaimsMixin:
    """Turn claims and the workers that hold them, over the ``_tx`` transactions of a SQL store."""

    @abstractmethod
    def _tx(self, write: bool = True) -> "AbstractContextManager[Run]":
        """A transaction yielding ``run(sql, params) -> rows``."""

    @abstractmethod
    def _write_through(self, conversation_ids: Iterable[str]
                       ) -> "AbstractContextManager[Tuple[Run, Dict[str, List[Message]]]]":
        """A write transaction with the cached message lists of ``conversation_ids`` (``_sql.py``)."""

    @abstractmethod
    def get_conversation(self, conversation_id: str) -> List[Message]:
        """Every message of a conversation, oldest first."""

    # --- turns in flight -------------------------------------------------------------------------
    def save_partial(self, conversation_id: str, message_id: str, content: str) -> bool:
        """Save the text streamed so far into a ``pending`` placeholder; False (nothing written) once the answer is
        final (committed, cancelled or interrupted meanwhile). The cached conversation is updated in place (the next
        turn does not read it again)."""
        now = time.time()
        with self._write_through([conversation_id]) as (run, cache):
            saved = bool(run("UPDATE convrag_messages SET content = :c, updated_at = :t WHERE id = :m AND "
                             "status = 'pending' RETURNING id", {"c": content, "t": now, "m": message_id}))
            messages = cache.get(conversation_id)  # None: not cached, or read again anyway (_write_through)
            if saved and messages is not None:
                i = next((k for k, m in enumerate(messages) if m.id == message_id), None)
                if i is not None:
                    messages[i] = replace(messages[i], content=content, updated_at=now)
                else:  # another conversation's message: ask the database next
                    del cache[conversation_id]
                    self._forget(conversation_id)
            return saved

    def interrupt_pending(self, conversation_ids: Sequence[str]) -> List[str]:
        """Mark the ``pending`` answers of ``conversation_ids`` ``interrupted``, keeping their text; their ids. Only
        for conversations whose turns no live process is answering (their claim is held by the caller, or was just
        released from a dead worker)."""
        if not conversation_ids:
            return []
        with self._write_through(conversation_ids) as (run, cache):
            marked = self._interrupt(run, conversation_ids)
            for cid in conversation_ids:
                cache.pop(cid, None)
                self._forget(cid)
        return marked

    def abandoned_in(self, conversation_id: str) -> bool:
        """Whether the conversation holds a ``pending`` answer (read from the cached conversation: no write)."""
        return holds_pending(self.get_conversation(conversation_id))

    @staticmethod
    def _interrupt(run: Run, conversation_ids: Sequence[str]) -> List[str]:
        marked: List[str] = []
        for cid in conversation_ids:
            marked += [r[0] for r in run(
                "UPDATE convrag_messages SET status = :s, error = :e, updated_at = :t WHERE conversation_id = :c AND "
                "role = 'assistant' AND status = 'pending' RETURNING id",
                {"s": INTERRUPTED, "e": INTERRUPTED_ERROR, "t": time.time(), "c": cid})]
        return marked

    def _forget(self, conversation_id: str) -> None:
        """Drop a conversation's cached messages (read again next time)."""
        cache = getattr(self, "_history_cache", None)
        if cache is not None:
            cache.pop(conversation_id, None)

    # --- claims ----------------------------------------------------------------------------------
    def claim_turn(self, conversation_id: str, ttl_s: float, worker: Optional[str] = None) -> bool:
        """Claim the conversation for one turn for ``ttl_s`` seconds (a worker's renewals extend it); False when
        another claim holds it."""
        now = time.time()
        with self._tx() as run:
            rows = run("UPDATE convrag_conversations SET busy_until = :u, claimed_by = :w WHERE id = :c AND "
                       "(busy_until IS NULL OR busy_until < :n) RETURNING id",
                       {"u": now + ttl_s, "w": worker, "c": conversation_id, "n": now})
        return bool(rows)

    def release_turn(self, conversation_id: str, worker: Optional[str] = None) -> bool:
        """Free the conversation's claim; with ``worker``, only a claim that worker holds (a claim that lapsed and
        was taken by another worker stays). False when nothing was released."""
        where, params = "id = :c", {"c": conversation_id}
        if worker is not None:
            where, params = where + " AND claimed_by = :w", {**params, "w": worker}
        with self._tx() as run:
            return bool(run(f"UPDATE convrag_conversations SET busy_until = NULL, claimed_by = NULL WHERE {where} "
                            "AND busy_until IS NOT NULL RETURNING id", params))

    def claims_of(self, worker: str) -> List[str]:
        """The conversations ``worker`` holds a live claim on."""
        with self._tx(write=False) as run:
            rows = run("SELECT id FROM convrag_conversations WHERE claimed_by = :w AND busy_until >= :n ORDER BY id",
                       {"w": worker, "n": time.time()})
        return [r[0] for r in rows]

    # --- workers ---------------------------------------------------------------------------------
    def register_worker(self, name: str, lease_s: float) -> Tuple[Worker, List[str]]:
        """Register a new worker under ``name`` with a lease of ``lease_s`` seconds. Claims held by earlier workers
        of the same name (this worker before a restart) and by workers whose lease lapsed are released at once (their
        answers ``interrupted``); returns the worker and the conversations released."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"a worker's name must be a non-empty string, got {name!r}")
        _check_lease(lease_s)
        now = time.time()
        worker = Worker(id=secrets.token_hex(8), name=name, started_at=now, lease_until=now + lease_s)
        with self._tx() as run:
            gone = [r[0] for r in run("SELECT id FROM convrag_workers WHERE name = :m OR lease_until < :n",
                                      {"m": name, "n": now})]
            released = self._release_workers(run, gone)
            run("INSERT INTO convrag_workers (id, name, started_at, lease_until) VALUES (:i, :m, :t, :u)",
                {"i": worker.id, "m": name, "t": now, "u": worker.lease_until})
        return worker, released

    def renew_worker(self, worker_id: str, lease_s: float) -> bool:
        """Extend the worker's lease and every claim it holds to ``lease_s`` seconds from now (one transaction);
        False when the worker is no longer registered (another process found its lease lapsed and released its
        claims: its turns no longer hold their conversations)."""
        _check_lease(lease_s)
        until = time.time() + lease_s
        with self._tx() as run:
            if not run("UPDATE convrag_workers SET lease_until = :u WHERE id = :i RETURNING id",
                       {"u": until, "i": worker_id}):
                return False
            run("UPDATE convrag_conversations SET busy_until = :u WHERE claimed_by = :i AND busy_until IS NOT NULL",
                {"u": until, "i": worker_id})
        return True

    def unregister_worker(self, worker_id: str) -> List[str]:
        """A worker that stops: release its claims (answers still ``pending`` become ``interrupted``) and forget it;
        the conversations released."""
        with self._tx() as run:
            return self._release_workers(run, [worker_id])

    def release_lapsed_workers(self) -> List[str]:
        """Release the claims of every worker whose lease lapsed (it died without unregistering; its answers still
        ``pending`` become ``interrupted``) and forget those workers; the conversations released."""
        with self._tx() as run:
            gone = [r[0] for r in run("SELECT id FROM convrag_workers WHERE lease_until < :n", {"n": time.time()})]
            return self._release_workers(run, gone)

    def workers(self) -> List[Worker]:
        with self._tx(write=False) as run:
            rows = run("SELECT id, name, started_at, lease_until FROM convrag_workers ORDER BY started_at")
        return [Worker(id=r[0], name=r[1], started_at=float(r[2]), lease_until=float(r[3])) for r in rows]

    def _release_workers(self, run: Run, worker_ids: List[str]) -> List[str]:
        released: List[str] = []
        for wid in worker_ids:  # the worker's row first, as renew_worker locks it: no deadlock between the two
            run("DELETE FROM convrag_workers WHERE id = :w", {"w": wid})
            released += [r[0] for r in run("UPDATE convrag_conversations SET busy_until = NULL, claimed_by = NULL "
                                           "WHERE claimed_by = :w RETURNING id", {"w": wid})]
        if released:
            self._interrupt(run, released)
            for cid in released:
                self._forget(cid)
        return sorted(released)
