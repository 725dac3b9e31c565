"""Memory rows beside the messages: versioned conversation summaries and user facts, each row with its owner.

A mixin of :class:`~._sql.SQLConversationStore` (SQLite and PostgreSQL alike). Every call names the owner, and a row
of another owner reads as absent (``None``, ``[]`` or ``False``), as another user's conversation does.

* Summaries: each write is a new version (1, 2, ...) of the conversation's summary that says which messages it covers
  (``covers_to``: the last message folded in, ``covered``: how many) and where it came from (``source``: ``llm``,
  ``salient``, ``edit``). :meth:`MemoryRowsMixin.clear_summary` deletes every version.
* Facts: durable statements about a user. A replaced fact stays as history (``status='replaced'``, ``replaced_by``)
  and a retracted one too (``status='retracted'``); :meth:`MemoryRowsMixin.delete_fact` removes a fact and its
  history for good (the user's own delete).
"""

from __future__ import annotations

import json
import secrets
import time
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from llama_index_convrag.errors import ConfigurationError, RecordNotFoundError

Run = Callable[..., List[tuple]]
SUMMARY_SOURCES = ("llm", "salient", "edit")
FACT_STATUSES = ("active", "replaced", "retracted")

MEMORY_MIGRATION: List[str] = [  # v6: conversation summaries (versioned) and user facts
    "CREATE TABLE convrag_summaries (conversation_id TEXT NOT NULL, owner TEXT NOT NULL, version INTEGER NOT NULL, "
    "text TEXT NOT NULL, covers_to TEXT, covered INTEGER NOT NULL, tokens INTEGER NOT NULL, source TEXT NOT NULL, "
    "created_at {FLOAT} NOT NULL, PRIMARY KEY (conversation_id, version))",
    "CREATE TABLE convrag_facts (id TEXT PRIMARY KEY, owner TEXT NOT NULL, text TEXT NOT NULL, status TEXT NOT NULL, "
    "replaces TEXT, replaced_by TEXT, source_message_id TEXT, conversation_id TEXT, embedding TEXT, "
    "created_at {FLOAT} NOT NULL, updated_at {FLOAT} NOT NULL)",
    "CREATE INDEX convrag_facts_owner ON convrag_facts (owner, status, created_at)",
]


@dataclass
class SummaryVersion:
    """One version of a conversation's running summary."""

    conversation_id: str
    version: int
    text: str
    covers_to: Optional[str]
    covered: int
    tokens: int
    source: str
    created_at: float

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class Fact:
    """A statement a user made about themselves, with the message it came from and what it replaced."""

    id: str
    owner: str
    text: str
    status: str
    replaces: Optional[str]
    replaced_by: Optional[str]
    source_message_id: Optional[str]
    conversation_id: Optional[str]
    created_at: float
    updated_at: float
    embedding: Optional[List[float]] = field(default=None, repr=False)

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("owner", "embedding")}


_SUMMARY_COLS = "conversation_id, version, text, covers_to, covered, tokens, source, created_at"
_FACT_COLS = ("id, owner, text, status, replaces, replaced_by, source_message_id, conversation_id, created_at, "
              "updated_at, embedding")


def _summary(row: Sequence[Any]) -> SummaryVersion:
    return SummaryVersion(conversation_id=row[0], version=int(row[1]), text=row[2], covers_to=row[3],
                          covered=int(row[4]), tokens=int(row[5]), source=row[6], created_at=float(row[7]))


def _fact(row: Sequence[Any]) -> Fact:
    return Fact(id=row[0], owner=row[1], text=row[2], status=row[3], replaces=row[4], replaced_by=row[5],
                source_message_id=row[6], conversation_id=row[7], created_at=float(row[8]), updated_at=float(row[9]),
                embedding=None if row[10] is None else [float(x) for x in json.loads(row[10])])


def _check_owner(owner: str) -> None:
    if not isinstance(owner, str) or not owner:
        raise ConfigurationError(f"owner must be a non-empty string, got {owner!r}")


class MemoryRowsMixin:
    """Summaries and facts over the ``_tx`` transactions of a SQL store."""

    @abstractmethod
    def _tx(self, write: bool = True) -> "AbstractContextManager[Run]":
        """A transaction yielding ``run(sql, params) -> rows``."""

    # --- summaries -----------------------------------------------------------------------------
    def put_summary(self, owner: str, conversation_id: str, text: str, *, covers_to: Optional[str], covered: int,
                    tokens: int, source: str) -> SummaryVersion:
        """Write the next version of ``owner``'s summary of the conversation (RecordNotFoundError when the
        conversation is not theirs)."""
        _check_owner(owner)
        if source not in SUMMARY_SOURCES:
            raise ConfigurationError(f"source must be one of {list(SUMMARY_SOURCES)}, got {source!r}")
        for name, value in (("covered", covered), ("tokens", tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be an int >= 0, got {value!r}")
        now = time.time()
        with self._tx() as run:
            self._owned_conversation(run, owner, conversation_id)
            rows = run("SELECT MAX(version) FROM convrag_summaries WHERE conversation_id = :c", {"c": conversation_id})
            version = 1 + int(rows[0][0] or 0)
            run(f"INSERT INTO convrag_summaries ({_SUMMARY_COLS}, owner) VALUES (:c, :v, :x, :t, :n, :k, :s, :at, :o)",
                {"c": conversation_id, "v": version, "x": text, "t": covers_to, "n": covered, "k": tokens,
                 "s": source, "at": now, "o": owner})
        return SummaryVersion(conversation_id, version, text, covers_to, covered, tokens, source, now)

    @staticmethod
    def _owned_conversation(run: Run, owner: str, conversation_id: str) -> None:
        rows = run("SELECT owner FROM convrag_conversations WHERE id = :c", {"c": conversation_id})
        if not rows or rows[0][0] != owner:
            raise RecordNotFoundError(f"no conversation {conversation_id!r} of this owner")

    def get_summary(self, owner: str, conversation_id: str, version: Optional[int] = None) -> Optional[SummaryVersion]:
        """The latest version (or ``version``) of ``owner``'s summary of the conversation; None when there is none."""
        params: Dict[str, Any] = {"c": conversation_id, "o": owner}
        where = "conversation_id = :c AND owner = :o"
        if version is not None:
            where += " AND version = :v"
            params["v"] = version
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_SUMMARY_COLS} FROM convrag_summaries WHERE {where} ORDER BY version DESC LIMIT 1",
                       params)
        return _summary(rows[0]) if rows else None

    def list_summaries(self, owner: str, conversation_id: str) -> List[SummaryVersion]:
        """Every version of ``owner``'s summary of the conversation, oldest first."""
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_SUMMARY_COLS} FROM convrag_summaries WHERE conversation_id = :c AND owner = :o "
                       "ORDER BY version", {"c": conversation_id, "o": owner})
        return [_summary(r) for r in rows]

    def clear_summary(self, owner: str, conversation_id: str) -> int:
        """Delete every version of ``owner``'s summary of the conversation; how many were deleted."""
        with self._tx() as run:
            rows = run("DELETE FROM convrag_summaries WHERE conversation_id = :c AND owner = :o RETURNING version",
                       {"c": conversation_id, "o": owner})
        return len(rows)

    # --- facts ---------------------------------------------------------------------------------
    def add_fact(self, owner: str, text: str, *, source_message_id: Optional[str] = None,
                 conversation_id: Optional[str] = None, embedding: Optional[Sequence[float]] = None,
                 replaces: Optional[str] = None) -> Fact:
        """Store a new active fact of ``owner``; with ``replaces``, that fact (theirs, active) becomes history."""
        _check_owner(owner)
        if not isinstance(text, str) or not text.strip():
            raise ConfigurationError(f"a fact's text must be a non-empty string, got {text!r}")
        now = time.time()
        fact = Fact(id=secrets.token_hex(12), owner=owner, text=text.strip(), status="active", replaces=replaces,
                    replaced_by=None, source_message_id=source_message_id, conversation_id=conversation_id,
                    created_at=now, updated_at=now, embedding=None if embedding is None else list(embedding))
        with self._tx() as run:
            if replaces is not None:
                done = run("UPDATE convrag_facts SET status = 'replaced', replaced_by = :n, updated_at = :t "
                           "WHERE id = :i AND owner = :o AND status = 'active' RETURNING id",
                           {"n": fact.id, "t": now, "i": replaces, "o": owner})
                if not done:
                    raise RecordNotFoundError(f"no active fact {replaces!r} of this owner to replace")
            run(f"INSERT INTO convrag_facts ({_FACT_COLS}) VALUES (:id, :owner, :text, :status, :replaces, "
                ":replaced_by, :source_message_id, :conversation_id, :created_at, :updated_at, :embedding)",
                {**{k: v for k, v in asdict(fact).items() if k != "embedding"},
                 "embedding": None if fact.embedding is None else json.dumps(fact.embedding)})
        return fact

    def retract_fact(self, owner: str, fact_id: str) -> bool:
        """Mark ``owner``'s active fact as retracted (kept as history); False when there is no such fact."""
        with self._tx() as run:
            rows = run("UPDATE convrag_facts SET status = 'retracted', updated_at = :t WHERE id = :i AND owner = :o "
                       "AND status = 'active' RETURNING id", {"t": time.time(), "i": fact_id, "o": owner})
        return bool(rows)

    def list_facts(self, owner: str, *, include_history: bool = False, newest: Optional[int] = None,
                   embeddings: bool = True) -> List[Fact]:
        """``owner``'s facts, oldest first: the active ones, or every row with ``include_history``; only the
        ``newest`` n (None: all); ``embeddings=False`` leaves their vectors out (``Fact.embedding`` None)."""
        where = "owner = :o" + ("" if include_history else " AND status = 'active'")
        params: Dict[str, Any] = {"o": owner}
        cols = _FACT_COLS if embeddings else _FACT_COLS.replace("embedding", "NULL")
        order = "ORDER BY created_at, id"
        if newest is not None:
            if isinstance(newest, bool) or not isinstance(newest, int) or newest < 0:
                raise ConfigurationError(f"newest must be an int >= 0 or None, got {newest!r}")
            order, params["n"] = "ORDER BY created_at DESC, id DESC LIMIT :n", newest
        with self._tx(write=False) as run:
            rows = run(f"SELECT {cols} FROM convrag_facts WHERE {where} {order}", params)
        facts = [_fact(r) for r in rows]
        return facts[::-1] if newest is not None else facts

    def get_fact(self, owner: str, fact_id: str) -> Optional[Fact]:
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_FACT_COLS} FROM convrag_facts WHERE id = :i AND owner = :o",
                       {"i": fact_id, "o": owner})
        return _fact(rows[0]) if rows else None

    def delete_fact(self, owner: str, fact_id: str) -> bool:
        """Delete ``owner``'s fact and every row of its history (what it replaced, what replaced it); False when
        there is no such fact."""
        with self._tx() as run:
            rows = run("SELECT id, replaces, replaced_by FROM convrag_facts WHERE owner = :o", {"o": owner})
            links = {r[0]: (r[1], r[2]) for r in rows}
            if fact_id not in links:
                return False
            chain, todo = set(), [fact_id]
            while todo:
                i = todo.pop()
                if i in chain or i not in links:
                    continue
                chain.add(i)
                todo.extend(x for x in links[i] if x is not None)
            for i in chain:
                run("DELETE FROM convrag_facts WHERE id = :i AND owner = :o", {"i": i, "o": owner})
        return True

    def delete_facts(self, owner: str) -> int:
        """Delete every fact of ``owner`` (history included); how many rows."""
        with self._tx() as run:
            return len(run("DELETE FROM convrag_facts WHERE owner = :o RETURNING id", {"o": owner}))
