"""SQL logic shared by the SQLite and PostgreSQL conversation stores (named ``:param`` style works in both).

Schema is versioned in ``convrag_meta`` and migrated forward on open, one transaction per open; a newer version than
this code knows is refused rather than touched.
"""

from __future__ import annotations

import json
import threading
import time
from abc import abstractmethod
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from llama_index.core.bridge.pydantic import PrivateAttr

from llama_index_convrag.storage.conversation.base import (
    STATUSES,
    Citation,
    ConversationStore,
    ConversationStoreError,
    Message,
)

APP_ID = "llama-index-convrag"
Run = Callable[..., List[tuple]]

# Each step upgrades from version i to i+1. {AUTO}/{FLOAT} are dialect types.
MIGRATIONS: List[List[str]] = [
    [  # v1: messages and citations
        "CREATE TABLE IF NOT EXISTS convrag_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE convrag_messages (pos {AUTO}, id TEXT NOT NULL UNIQUE, conversation_id TEXT NOT NULL, "
        "role TEXT NOT NULL, content TEXT NOT NULL, status TEXT NOT NULL, created_at {FLOAT} NOT NULL, "
        "updated_at {FLOAT} NOT NULL, additional_kwargs TEXT NOT NULL)",
        "CREATE INDEX convrag_messages_conv ON convrag_messages (conversation_id, pos)",
        "CREATE TABLE convrag_citations (message_id TEXT NOT NULL, ord INTEGER NOT NULL, node_id TEXT NOT NULL, "
        "marker INTEGER, data TEXT NOT NULL, PRIMARY KEY (message_id, ord))",
    ],
    [  # v2: error text on messages, turn records
        "ALTER TABLE convrag_messages ADD COLUMN error TEXT",
        "CREATE TABLE convrag_turns (message_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, "
        "record TEXT NOT NULL)",
        "CREATE INDEX convrag_turns_conv ON convrag_turns (conversation_id)",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)

_MSG_COLS = "id, conversation_id, role, content, status, error, created_at, updated_at, additional_kwargs"
#: Conversations whose parsed messages a store keeps (see :meth:`SQLConversationStore.get_conversation`).
CACHED_CONVERSATIONS = 64
#: Rows updated this many seconds before the newest cached ``updated_at`` are re-read (clock skew between writers).
CLOCK_SLACK_S = 1.0


def _row_to_message(row: Sequence[Any]) -> Message:
    return Message(id=row[0], conversation_id=row[1], role=row[2], content=row[3], status=row[4], error=row[5],
                   created_at=float(row[6]), updated_at=float(row[7]), additional_kwargs=json.loads(row[8]))


class SQLConversationStore(ConversationStore):
    """Template: subclasses open a connection and provide ``_transaction`` plus dialect types."""

    _types: Dict[str, str] = PrivateAttr(default_factory=dict)
    _opened: bool = PrivateAttr(default=False)
    _open_lock: Any = PrivateAttr(default_factory=threading.Lock)
    #: conversation id -> (messages, max pos, max updated_at) as last read; refreshed incrementally.
    _history_cache: "OrderedDict[str, Tuple[List[Message], int, float]]" = PrivateAttr(default_factory=OrderedDict)

    # --- hooks ---------------------------------------------------------------------------------
    @abstractmethod
    def _connect(self) -> None:
        """Open the connection(s); check the file/database is ours or empty (raise ConversationStoreError)."""

    @abstractmethod
    @contextmanager
    def _transaction(self, *, migrate: bool = False, write: bool = True) -> Iterator[Run]:
        """A transaction yielding ``run(sql, params=None) -> rows`` (``write=False``: read-only, may share locks)."""

    def _describe(self) -> str:
        return type(self).__name__

    # --- opening and migration -----------------------------------------------------------------
    def open(self) -> "SQLConversationStore":
        """Connect and migrate now (otherwise done on first use). Idempotent."""
        with self._open_lock:
            if not self._opened:
                self._connect()
                self._migrate()
                self._opened = True
        return self

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[Run]:
        if not self._opened:
            self.open()
        with self._transaction(write=write) as run:
            yield run

    def _migrate(self) -> None:
        with self._transaction(migrate=True) as run:
            version = self._read_version(run)
            if version > SCHEMA_VERSION:
                raise ConversationStoreError(
                    f"{self._describe()} has conversation schema version {version}, newer than this code's "
                    f"{SCHEMA_VERSION}; upgrade llama-index-convrag (the data was left untouched)"
                )
            for step in range(version, SCHEMA_VERSION):
                for sql in MIGRATIONS[step]:
                    run(sql.format(**self._types))
                if step == 0:
                    run("INSERT INTO convrag_meta (key, value) VALUES ('app', :v)", {"v": APP_ID})
                    run("INSERT INTO convrag_meta (key, value) VALUES ('schema_version', '0')")
                run("UPDATE convrag_meta SET value = :v WHERE key = 'schema_version'", {"v": str(step + 1)})

    def _read_version(self, run: Run) -> int:
        if not self._has_meta(run):
            return 0
        rows = dict(run("SELECT key, value FROM convrag_meta"))
        if rows.get("app") != APP_ID or "schema_version" not in rows:
            raise ConversationStoreError(
                f"{self._describe()} has a convrag_meta table not written by {APP_ID} ({rows!r}); refusing to use it"
            )
        return int(rows["schema_version"])

    @abstractmethod
    def _has_meta(self, run: Run) -> bool:
        """Whether the convrag_meta table exists."""

    def schema_version(self) -> int:
        with self._tx(write=False) as run:
            return self._read_version(run)

    # --- writes ----------------------------------------------------------------------------------
    def add_messages(self, messages: Sequence[Message]) -> None:
        for m in messages:
            _check_status(m.status)
        with self._tx() as run:
            for m in messages:
                run(
                    f"INSERT INTO convrag_messages ({_MSG_COLS}) VALUES (:id, :conversation_id, :role, :content, "
                    ":status, :error, :created_at, :updated_at, :additional_kwargs)",
                    {"id": m.id, "conversation_id": m.conversation_id, "role": m.role, "content": m.content,
                     "status": m.status, "error": m.error, "created_at": m.created_at, "updated_at": m.updated_at,
                     "additional_kwargs": json.dumps(m.additional_kwargs, default=str)},
                )

    def finalize_message(self, message_id: str, *, content: str, status: str, error: Optional[str] = None) -> None:
        _check_status(status)
        with self._tx() as run:
            self._finalize(run, message_id, content, status, error)

    def put_citations(self, message_id: str, citations: Sequence[Citation]) -> None:
        with self._tx() as run:
            self._put_citations(run, message_id, citations)

    def put_turn_record(self, conversation_id: str, message_id: str, record: Dict[str, Any]) -> None:
        with self._tx() as run:
            self._put_record(run, conversation_id, message_id, record)

    def finish_turn(self, conversation_id: str, message_id: str, *, content: str, status: str,
                    error: Optional[str], citations: Sequence[Citation], record: Dict[str, Any]) -> None:
        _check_status(status)
        with self._tx() as run:
            self._put_citations(run, message_id, citations)
            self._put_record(run, conversation_id, message_id, record)
            self._finalize(run, message_id, content, status, error)

    @staticmethod
    def _finalize(run: Run, message_id: str, content: str, status: str, error: Optional[str]) -> None:
        if not run("SELECT id FROM convrag_messages WHERE id = :id", {"id": message_id}):
            raise KeyError(f"no message with id {message_id!r}")
        run("UPDATE convrag_messages SET content = :c, status = :s, error = :e, updated_at = :t WHERE id = :id",
            {"c": content, "s": status, "e": error, "t": time.time(), "id": message_id})

    @staticmethod
    def _put_citations(run: Run, message_id: str, citations: Sequence[Citation]) -> None:
        run("DELETE FROM convrag_citations WHERE message_id = :m", {"m": message_id})
        for i, c in enumerate(citations):
            run("INSERT INTO convrag_citations (message_id, ord, node_id, marker, data) VALUES (:m, :o, :n, :k, :d)",
                {"m": message_id, "o": i, "n": c.node_id, "k": c.marker, "d": json.dumps(c.to_dict(), default=str)})

    @staticmethod
    def _put_record(run: Run, conversation_id: str, message_id: str, record: Dict[str, Any]) -> None:
        run("DELETE FROM convrag_turns WHERE message_id = :m", {"m": message_id})
        run("INSERT INTO convrag_turns (message_id, conversation_id, record) VALUES (:m, :c, :r)",
            {"m": message_id, "c": conversation_id, "r": json.dumps(record, default=str)})

    def delete_conversation(self, conversation_id: str) -> List[Message]:
        self._history_cache.pop(conversation_id, None)
        with self._tx() as run:
            rows = run(f"SELECT {_MSG_COLS} FROM convrag_messages WHERE conversation_id = :c ORDER BY pos",
                       {"c": conversation_id})
            messages = [_row_to_message(r) for r in rows]
            self._delete_ids(run, [m.id for m in messages])
        return messages

    def _delete_message_ids(self, ids: Sequence[str]) -> None:
        self._history_cache.clear()
        with self._tx() as run:
            self._delete_ids(run, ids)

    @staticmethod
    def _delete_ids(run: Run, ids: Sequence[str]) -> None:
        for mid in ids:
            for table, col in (("convrag_citations", "message_id"), ("convrag_turns", "message_id"),
                               ("convrag_messages", "id")):
                run(f"DELETE FROM {table} WHERE {col} = :m", {"m": mid})

    # --- reads -----------------------------------------------------------------------------------
    def get_conversation(self, conversation_id: str) -> List[Message]:
        """The conversation's messages in order (treat them as read-only).

        Parsed messages are cached per conversation; a later call reads only rows added or updated since (plus a
        row count, so deletions by any writer force a full read), so a turn does not re-parse the whole history.
        """
        c = {"c": conversation_id}
        with self._tx(write=False) as run:
            cached = self._history_cache.get(conversation_id)
            if cached is not None:
                messages, last_pos, last_update = cached
                count = run("SELECT COUNT(*) FROM convrag_messages WHERE conversation_id = :c", c)[0][0]
                rows = run(f"SELECT pos, {_MSG_COLS} FROM convrag_messages WHERE conversation_id = :c AND "
                           "(pos > :p OR updated_at >= :t) ORDER BY pos",
                           {**c, "p": last_pos, "t": last_update - CLOCK_SLACK_S})
                merged = _merge(messages, rows)
                cached = (merged, *_marks(rows, last_pos, last_update)) if len(merged) == count else None
            if cached is None:
                rows = run(f"SELECT pos, {_MSG_COLS} FROM convrag_messages WHERE conversation_id = :c ORDER BY pos",
                           c)
                cached = ([_row_to_message(r[1:]) for r in rows], *_marks(rows, -1, float("-inf")))
        self._history_cache[conversation_id] = cached
        self._history_cache.move_to_end(conversation_id)
        while len(self._history_cache) > CACHED_CONVERSATIONS:
            self._history_cache.popitem(last=False)
        return list(cached[0])

    def get_message(self, message_id: str) -> Optional[Message]:
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_MSG_COLS} FROM convrag_messages WHERE id = :id", {"id": message_id})
        return _row_to_message(rows[0]) if rows else None

    def get_citations(self, message_id: str) -> List[Citation]:
        with self._tx(write=False) as run:
            rows = run("SELECT data FROM convrag_citations WHERE message_id = :m ORDER BY ord", {"m": message_id})
        return [Citation.from_dict(json.loads(r[0])) for r in rows]

    def get_turn_record(self, message_id: str) -> Optional[Dict[str, Any]]:
        with self._tx(write=False) as run:
            rows = run("SELECT record FROM convrag_turns WHERE message_id = :m", {"m": message_id})
        return json.loads(rows[0][0]) if rows else None

    def list_turn_records(self, conversation_id: str) -> List[Dict[str, Any]]:
        with self._tx(write=False) as run:
            rows = run("SELECT t.record FROM convrag_turns t JOIN convrag_messages m ON m.id = t.message_id "
                       "WHERE t.conversation_id = :c ORDER BY m.pos", {"c": conversation_id})
        return [json.loads(r[0]) for r in rows]

    def list_conversations(self) -> List[str]:
        with self._tx(write=False) as run:
            rows = run("SELECT conversation_id, MIN(pos) AS first FROM convrag_messages "
                       "GROUP BY conversation_id ORDER BY first")
        return [r[0] for r in rows]


def _merge(messages: List[Message], rows: Sequence[Sequence[Any]]) -> List[Message]:
    """``messages`` with re-read rows (``pos`` first) replacing their old versions and new ones appended."""
    if not rows:
        return messages
    out = list(messages)
    where = {m.id: i for i, m in enumerate(out)}
    for r in rows:
        i = where.get(r[1])
        if i is None:
            out.append(_row_to_message(r[1:]))
        elif float(r[8]) != out[i].updated_at:  # unchanged rows (same updated_at) are not parsed again
            out[i] = _row_to_message(r[1:])
    return out


def _marks(rows: Sequence[Sequence[Any]], last_pos: int, last_update: float) -> Tuple[int, float]:
    """The highest ``pos`` and ``updated_at`` seen so far."""
    for r in rows:
        last_pos = max(last_pos, int(r[0]))
        last_update = max(last_update, float(r[8]))
    return last_pos, last_update


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {sorted(STATUSES)}, got {status!r}")
