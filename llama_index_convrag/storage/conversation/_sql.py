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
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, ContextManager, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import PrivateAttr

from llama_index_convrag.errors import ConfigurationError, RecordNotFoundError
from llama_index_convrag.storage.conversation.accounts import AccountsMixin, in_params
from llama_index_convrag.storage.conversation.claims import ClaimsMixin
from llama_index_convrag.storage.conversation.knowledge import KnowledgeMixin
from llama_index_convrag.storage.conversation.memory_rows import MEMORY_MIGRATION, MemoryRowsMixin
from llama_index_convrag.storage.conversation.base import (
    STATUSES,
    Citation,
    new_id,
    ConversationStore,
    ConversationStoreError,
    Message,
)

APP_ID = "llama-index-convrag"
Run = Callable[..., List[tuple]]
#: A cached conversation: its messages, the highest ``pos`` and ``updated_at`` read, and the change token.
Cached = Tuple[List[Message], int, float, Optional[Any]]

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
    [  # v3: answer versions, conversations with owner and title, API keys, feedback (convrag serve)
        "ALTER TABLE convrag_messages ADD COLUMN reply_to TEXT",
        "ALTER TABLE convrag_messages ADD COLUMN version INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE convrag_messages ADD COLUMN superseded_by TEXT",
        "CREATE TABLE convrag_conversations (id TEXT PRIMARY KEY, owner TEXT NOT NULL, title TEXT, "
        "created_at {FLOAT} NOT NULL, updated_at {FLOAT} NOT NULL, busy_until {FLOAT})",
        "CREATE INDEX convrag_conversations_owner ON convrag_conversations (owner, created_at)",
        "INSERT INTO convrag_conversations (id, owner, title, created_at, updated_at) SELECT conversation_id, "
        "'local', NULL, MIN(created_at), MAX(updated_at) FROM convrag_messages GROUP BY conversation_id",
        "CREATE TABLE convrag_keys (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, key_hash TEXT NOT NULL UNIQUE, "
        "prefix TEXT NOT NULL, created_at {FLOAT} NOT NULL, revoked_at {FLOAT})",
        "CREATE TABLE convrag_feedback (message_id TEXT NOT NULL, user_id TEXT NOT NULL, rating TEXT NOT NULL, "
        "text TEXT, created_at {FLOAT} NOT NULL, PRIMARY KEY (message_id, user_id))",
    ],
    [  # v4: a memory's view of a conversation (BaseChatStore.set_messages and friends; the conversation stays)
        "CREATE TABLE convrag_views (conversation_id TEXT PRIMARY KEY, messages TEXT NOT NULL, "
        "updated_at {FLOAT} NOT NULL)",
    ],
    [  # v5: knowledge bases and their members, users with a role, key scopes, turn claims held by a worker
        "ALTER TABLE convrag_conversations ADD COLUMN kb_id TEXT",
        "ALTER TABLE convrag_conversations ADD COLUMN claimed_by TEXT",
        "CREATE INDEX convrag_conversations_claimed ON convrag_conversations (claimed_by)",
        "ALTER TABLE convrag_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT 'chat,edit'",
        "CREATE TABLE convrag_users (id TEXT PRIMARY KEY, role TEXT NOT NULL, created_at {FLOAT} NOT NULL)",
        "INSERT INTO convrag_users (id, role, created_at) SELECT user_id, 'member', MIN(created_at) FROM "
        "convrag_keys GROUP BY user_id",
        "CREATE TABLE convrag_kbs (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, collection TEXT NOT NULL UNIQUE, "
        "owner TEXT NOT NULL, description TEXT, roots TEXT NOT NULL, created_at {FLOAT} NOT NULL, "
        "updated_at {FLOAT} NOT NULL)",
        "CREATE TABLE convrag_kb_members (kb_id TEXT NOT NULL, user_id TEXT NOT NULL, role TEXT NOT NULL, "
        "created_at {FLOAT} NOT NULL, PRIMARY KEY (kb_id, user_id))",
        "CREATE INDEX convrag_kb_members_user ON convrag_kb_members (user_id)",
        "CREATE TABLE convrag_workers (id TEXT PRIMARY KEY, name TEXT NOT NULL, started_at {FLOAT} NOT NULL, "
        "lease_until {FLOAT} NOT NULL)",
    ],
    MEMORY_MIGRATION,  # v6: conversation summaries (versioned) and user facts (one step, self-contained)
]
SCHEMA_VERSION = len(MIGRATIONS)

_MSG_COLS = ("id, conversation_id, role, content, status, error, created_at, updated_at, additional_kwargs, "
             "reply_to, version, superseded_by")
#: the owner of conversations written without one (``convrag chat``, the engine alone): the open server's user
DEFAULT_OWNER = "local"
#: Conversations whose parsed messages a store keeps (see :meth:`SQLConversationStore.get_conversation`).
CACHED_CONVERSATIONS = 64
#: Rows updated this many seconds before the newest cached ``updated_at`` are re-read (clock skew between writers).
CLOCK_SLACK_S = 1.0


def _row_to_message(row: Sequence[Any]) -> Message:
    return Message(id=row[0], conversation_id=row[1], role=row[2], content=row[3], status=row[4], error=row[5],
                   created_at=float(row[6]), updated_at=float(row[7]), additional_kwargs=json.loads(row[8]),
                   reply_to=row[9], version=int(row[10]), superseded_by=row[11])


class SQLConversationStore(AccountsMixin, KnowledgeMixin, ClaimsMixin, MemoryRowsMixin, ConversationStore):
    """Template: subclasses open a connection and provide ``_transaction`` plus dialect types."""

    _types: Dict[str, str] = PrivateAttr(default_factory=dict)
    _opened: bool = PrivateAttr(default=False)
    _open_lock: Any = PrivateAttr(default_factory=threading.Lock)
    #: conversation id -> (messages, max pos, max updated_at as last read, change token); see get_conversation.
    _history_cache: "OrderedDict[str, Cached]" = PrivateAttr(default_factory=OrderedDict)

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

    def _change_token(self, run: Run) -> Optional[Any]:
        """A value that changes whenever *another* connection commits (SQLite: ``PRAGMA data_version``), read
        inside ``run``'s transaction; None when the backend has none (every read then asks the database)."""
        return None

    # --- opening and migration -----------------------------------------------------------------
    def open(self) -> "SQLConversationStore":
        """Connect and migrate now (otherwise done on first use). Idempotent."""
        if self._opened:  # every call after the first (each read of a private attribute is a pydantic lookup)
            return self
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
        with self._write_through({m.conversation_id for m in messages}) as (run, cache):
            for m in messages:
                self._insert_message(run, m, cache)

    @staticmethod
    def _touch_conversation(run: Run, conversation_id: str, at: float) -> None:
        """The conversation's row, created owned by :data:`DEFAULT_OWNER` when new (an existing owner is kept)."""
        run("INSERT INTO convrag_conversations (id, owner, title, created_at, updated_at) VALUES (:c, :o, NULL, :t, "
            ":t) ON CONFLICT (id) DO UPDATE SET updated_at = :t", {"c": conversation_id, "o": DEFAULT_OWNER,
                                                                   "t": at})

    def _insert_message(self, run: Run, m: Message, cache: Dict[str, List[Message]]) -> None:
        """Insert one message (its conversation row too, owned by :data:`DEFAULT_OWNER` when new)."""
        kwargs = json.dumps(m.additional_kwargs, default=str)
        self._touch_conversation(run, m.conversation_id, m.updated_at)
        run(
            f"INSERT INTO convrag_messages ({_MSG_COLS}) VALUES (:id, :conversation_id, :role, :content, "
            ":status, :error, :created_at, :updated_at, :additional_kwargs, :reply_to, :version, :superseded_by)",
            {"id": m.id, "conversation_id": m.conversation_id, "role": m.role, "content": m.content,
             "status": m.status, "error": m.error, "created_at": m.created_at, "updated_at": m.updated_at,
             "additional_kwargs": kwargs, "reply_to": m.reply_to, "version": m.version,
             "superseded_by": m.superseded_by},
        )
        if m.conversation_id in cache:  # as a read would return it (JSON round trip of the kwargs)
            cache[m.conversation_id].append(Message(
                id=m.id, conversation_id=m.conversation_id, role=m.role, content=m.content, status=m.status,
                error=m.error, created_at=float(m.created_at), updated_at=float(m.updated_at),
                additional_kwargs=json.loads(kwargs), reply_to=m.reply_to, version=m.version,
                superseded_by=m.superseded_by))

    def begin_regeneration(self, user_message: Message) -> Message:
        cid = user_message.conversation_id
        with self._write_through({cid}) as (run, cache):
            rows = run("SELECT id, version FROM convrag_messages WHERE reply_to = :u AND role = 'assistant'",
                       {"u": user_message.id})
            placeholder = Message(id=new_id(), conversation_id=cid, role="assistant", content="", status="pending",
                                  reply_to=user_message.id, version=1 + max([int(r[1]) for r in rows], default=0))
            run("UPDATE convrag_messages SET superseded_by = :n, updated_at = :t WHERE reply_to = :u AND "
                "role = 'assistant' AND superseded_by IS NULL",
                {"n": placeholder.id, "u": user_message.id, "t": placeholder.updated_at})
            cache.pop(cid, None)
            self._history_cache.pop(cid, None)
            self._insert_message(run, placeholder, cache)
        return placeholder

    def finalize_message(self, message_id: str, *, content: str, status: str, error: Optional[str] = None) -> None:
        _check_status(status)
        with self._tx() as run:
            self._finalize(run, message_id, content, status, error)
            self._stale_cache()  # its conversation is not known here: every cached one asks the database next

    def put_citations(self, message_id: str, citations: Sequence[Citation]) -> None:
        with self._tx() as run:
            self._put_citations(run, message_id, citations)

    def put_turn_record(self, conversation_id: str, message_id: str, record: Dict[str, Any]) -> None:
        with self._tx() as run:
            self._put_record(run, conversation_id, message_id, record)

    def finish_turn(self, conversation_id: str, message_id: str, *, content: str, status: str,
                    error: Optional[str], citations: Sequence[Citation], record: Dict[str, Any]) -> None:
        _check_status(status)
        with self._write_through({conversation_id}) as (run, cache):
            self._put_citations(run, message_id, citations)
            self._put_record(run, conversation_id, message_id, record)
            updated_at = self._finalize(run, message_id, content, status, error)
            messages = cache.get(conversation_id)
            i = _index_of(messages, message_id) if messages is not None else None
            if messages is not None and i is None:  # another conversation's message: ask the database next
                del cache[conversation_id]
            elif messages is not None and i is not None:
                old = messages[i]
                messages[i] = Message(id=old.id, conversation_id=old.conversation_id, role=old.role, content=content,
                                      status=status, error=error, created_at=old.created_at, updated_at=updated_at,
                                      additional_kwargs=old.additional_kwargs, reply_to=old.reply_to,
                                      version=old.version, superseded_by=old.superseded_by)

    @staticmethod
    def _finalize(run: Run, message_id: str, content: str, status: str, error: Optional[str]) -> float:
        """Update the message; returns the ``updated_at`` written."""
        if not run("SELECT id FROM convrag_messages WHERE id = :id", {"id": message_id}):
            raise RecordNotFoundError(f"no message with id {message_id!r}")
        now = time.time()
        run("UPDATE convrag_messages SET content = :c, status = :s, error = :e, updated_at = :t WHERE id = :id",
            {"c": content, "s": status, "e": error, "t": now, "id": message_id})
        return now

    # --- the history cache ----------------------------------------------------------------------
    def _cache_guard(self) -> ContextManager[Any]:
        """Held around a cache update and the transaction it mirrors (SQLite: the connection's lock), so that
        threads sharing this store object apply their writes to the cache in commit order."""
        return nullcontext()

    @contextmanager
    def _write_through(self, conversation_ids: Iterable[str]) -> Iterator[Tuple[Run, Dict[str, List[Message]]]]:
        """A write transaction, with the cached message lists of ``conversation_ids`` that the write updates in
        place: only those no other connection changed since they were read (same change token), so the cache stays
        an exact copy of the table. The others are dropped (read again next time), as are all of them on failure."""
        self.open()  # before the guard: opening takes the connection's lock after the open lock, never inside it
        with self._cache_guard():
            lists: Dict[str, List[Message]] = {}
            try:
                with self._tx() as run:
                    token = self._change_token(run)
                    for cid in conversation_ids:
                        cached = self._history_cache.get(cid)
                        if token is None or cached is None:  # no token: reads re-check the rows anyway
                            continue
                        if cached[3] == token:
                            lists[cid] = list(cached[0])
                        else:
                            del self._history_cache[cid]
                    yield run, lists
            except BaseException:
                for cid in lists:
                    self._history_cache.pop(cid, None)
                raise
            for cid, messages in lists.items():
                cached = self._history_cache.get(cid)
                if cached is not None:
                    self._history_cache[cid] = (messages, *cached[1:])

    def _stale_cache(self) -> None:
        """Every cached conversation asks the database on its next read (incrementally)."""
        for cid in list(self._history_cache):
            self._history_cache[cid] = (*self._history_cache[cid][:3], None)

    @staticmethod
    def _put_citations(run: Run, message_id: str, citations: Sequence[Citation]) -> None:
        run("DELETE FROM convrag_citations WHERE message_id = :m", {"m": message_id})
        for i, c in enumerate(citations):
            run("INSERT INTO convrag_citations (message_id, ord, node_id, marker, data) VALUES (:m, :o, :n, :k, :d)",
                {"m": message_id, "o": i, "n": c.node_id, "k": c.marker, "d": json.dumps(c.to_dict(), default=str)})

    @staticmethod
    def _put_record(run: Run, conversation_id: str, message_id: str, record: Dict[str, Any]) -> None:
        """Store a turn record; its ``answer`` and ``citations`` are not copied: they are the message's content and
        its citations (their own rows), filled in on read (:func:`_with_answer`)."""
        apart = {k: None for k in APART if k in record}
        run("DELETE FROM convrag_turns WHERE message_id = :m", {"m": message_id})
        run("INSERT INTO convrag_turns (message_id, conversation_id, record) VALUES (:m, :c, :r)",
            {"m": message_id, "c": conversation_id, "r": json.dumps({**record, **apart}, default=str)})

    def delete_conversation(self, conversation_id: str) -> List[Message]:
        with self._tx() as run:
            self._history_cache.pop(conversation_id, None)  # in the transaction: no read of this store interleaves
            rows = run(f"SELECT {_MSG_COLS} FROM convrag_messages WHERE conversation_id = :c ORDER BY pos",
                       {"c": conversation_id})
            messages = [_row_to_message(r) for r in rows]
            self._delete_ids(run, [m.id for m in messages])
            run("DELETE FROM convrag_summaries WHERE conversation_id = :c", {"c": conversation_id})
            run("DELETE FROM convrag_views WHERE conversation_id = :c", {"c": conversation_id})
            run("DELETE FROM convrag_conversations WHERE id = :c", {"c": conversation_id})
        return messages

    # --- the view (BaseChatStore) ----------------------------------------------------------------------------
    def read_view(self, key: str) -> Optional[List[ChatMessage]]:
        with self._tx(write=False) as run:
            rows = run("SELECT messages FROM convrag_views WHERE conversation_id = :c", {"c": key})
        return _view_of(rows[0][0]) if rows else None

    def edit_view(self, key: str, edit: Callable[[List[ChatMessage]], List[ChatMessage]]) -> List[ChatMessage]:
        with self._tx() as run:
            rows = run("SELECT messages FROM convrag_views WHERE conversation_id = :c", {"c": key})
            if rows:
                current = _view_of(rows[0][0])
            else:
                current = [_row_to_message(r).to_chat_message() for r in run(
                    f"SELECT {_MSG_COLS} FROM convrag_messages WHERE conversation_id = :c ORDER BY pos", {"c": key})]
            now = time.time()
            self._touch_conversation(run, key, now)
            run("INSERT INTO convrag_views (conversation_id, messages, updated_at) VALUES (:c, :v, :t) "
                "ON CONFLICT (conversation_id) DO UPDATE SET messages = :v, updated_at = :t",
                {"c": key, "v": _view_json(edit(list(current))), "t": now})
        return current

    def append_message(self, message: Message) -> None:
        _check_status(message.status)
        cid = message.conversation_id
        with self._write_through({cid}) as (run, cache):
            self._insert_message(run, message, cache)
            rows = run("SELECT messages FROM convrag_views WHERE conversation_id = :c", {"c": cid})
            if rows:
                run("UPDATE convrag_views SET messages = :v, updated_at = :t WHERE conversation_id = :c",
                    {"c": cid, "v": _view_json([*_view_of(rows[0][0]), message.to_chat_message()]),
                     "t": message.updated_at})

    def get_keys(self) -> List[str]:
        """Keys whose messages (``get_messages``) are not empty: a conversation without a view that has messages,
        or one whose view is not empty; oldest conversation first."""
        with self._tx(write=False) as run:
            rows = run("SELECT c.id FROM convrag_conversations c LEFT JOIN convrag_views v ON v.conversation_id = c.id "
                       "WHERE (v.conversation_id IS NULL AND EXISTS (SELECT 1 FROM convrag_messages m WHERE "
                       "m.conversation_id = c.id)) OR (v.conversation_id IS NOT NULL AND v.messages <> '[]') "
                       "ORDER BY c.created_at, c.id")
        return [r[0] for r in rows]

    @staticmethod
    def _delete_ids(run: Run, ids: Sequence[str]) -> None:
        for mid in ids:
            for table, col in (("convrag_citations", "message_id"), ("convrag_turns", "message_id"),
                               ("convrag_feedback", "message_id"), ("convrag_messages", "id")):
                run(f"DELETE FROM {table} WHERE {col} = :m", {"m": mid})

    # --- reads -----------------------------------------------------------------------------------
    def get_conversation(self, conversation_id: str) -> List[Message]:
        """The conversation's messages in order (treat them as read-only).

        Parsed messages are cached per conversation, and this store's own writes update the cache. While no other
        connection has committed since (the backend's change token, SQLite's ``data_version``), the cache is
        returned as is; otherwise only rows added or updated since are read (plus a row count, so deletions by any
        writer force a full read), so a turn does not re-parse the whole history.
        """
        c = {"c": conversation_id}
        self.open()  # before the guard (see _write_through)
        with self._cache_guard(), self._tx(write=False) as run:
            token = self._change_token(run)  # before the rows: a commit after it only makes the next read re-check
            cached = self._history_cache.get(conversation_id)
            if cached is not None and (token is None or cached[3] != token):
                messages, last_pos, last_update, _ = cached
                count = run("SELECT COUNT(*) FROM convrag_messages WHERE conversation_id = :c", c)[0][0]
                rows = run(f"SELECT pos, {_MSG_COLS} FROM convrag_messages WHERE conversation_id = :c AND "
                           "(pos > :p OR updated_at >= :t) ORDER BY pos",
                           {**c, "p": last_pos, "t": last_update - CLOCK_SLACK_S})
                merged = _merge(messages, rows)
                cached = (merged, *_marks(rows, last_pos, last_update), token) if len(merged) == count else None
            if cached is None:
                rows = run(f"SELECT pos, {_MSG_COLS} FROM convrag_messages WHERE conversation_id = :c ORDER BY pos",
                           c)
                cached = ([_row_to_message(r[1:]) for r in rows], *_marks(rows, -1, float("-inf")), token)
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

    def get_citations_of(self, message_ids: Sequence[str]) -> Dict[str, List[Citation]]:
        """The citations of each of ``message_ids`` (``[]`` for none), in one query per chunk of ids."""
        out: Dict[str, List[Citation]] = {m: [] for m in message_ids}
        for where, params in in_params("message_id", list(out)):
            with self._tx(write=False) as run:
                rows = run(f"SELECT message_id, data FROM convrag_citations WHERE {where} ORDER BY ord", params)
            for message_id, data in rows:
                out[message_id].append(Citation.from_dict(json.loads(data)))
        return out

    def get_turn_record(self, message_id: str) -> Optional[Dict[str, Any]]:
        with self._tx(write=False) as run:
            rows = run("SELECT t.record, m.content FROM convrag_turns t LEFT JOIN convrag_messages m ON "
                       "m.id = t.message_id WHERE t.message_id = :m", {"m": message_id})
        if not rows:
            return None
        record = json.loads(rows[0][0])
        citations = self.get_citations(message_id) if record.get("citations", []) is None else []
        return _with_answer(record, rows[0][1], citations)

    def list_turn_records(self, conversation_id: str) -> List[Dict[str, Any]]:
        with self._tx(write=False) as run:
            rows = run("SELECT t.record, m.content, t.message_id FROM convrag_turns t JOIN convrag_messages m ON "
                       "m.id = t.message_id WHERE t.conversation_id = :c ORDER BY m.pos", {"c": conversation_id})
        records = [(json.loads(r[0]), r[1], r[2]) for r in rows]
        apart = [mid for record, _, mid in records if record.get("citations", []) is None]
        citations = self.get_citations_of(apart) if apart else {}
        return [_with_answer(record, content, citations.get(mid, [])) for record, content, mid in records]

    def list_conversations(self) -> List[str]:
        with self._tx(write=False) as run:
            rows = run("SELECT conversation_id, MIN(pos) AS first FROM convrag_messages "
                       "GROUP BY conversation_id ORDER BY first")
        return [r[0] for r in rows]


#: Turn-record fields stored once, in their own rows (the message's content, its citations), not in the record JSON.
APART = ("answer", "citations")


def _with_answer(record: Dict[str, Any], content: Optional[str], citations: Sequence[Citation]) -> Dict[str, Any]:
    """A stored record with the fields kept apart (None in the JSON) filled in from their rows."""
    if "answer" in record and record["answer"] is None:
        record["answer"] = content if content is not None else ""
    if "citations" in record and record["citations"] is None:
        record["citations"] = [c.to_dict() for c in citations]
    return record


def _view_json(messages: Sequence[ChatMessage]) -> str:
    return json.dumps([{"role": m.role.value if isinstance(m.role, MessageRole) else str(m.role),
                        "content": m.content or "", "additional_kwargs": dict(m.additional_kwargs)}
                       for m in messages], default=str)


def _view_of(text: str) -> List[ChatMessage]:
    return [ChatMessage(role=MessageRole(d["role"]), content=d["content"], additional_kwargs=d["additional_kwargs"])
            for d in json.loads(text)]


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


def _index_of(messages: Sequence[Message], message_id: str) -> Optional[int]:
    """The position of ``message_id`` in ``messages`` (searched from the end: it is usually the newest), or None."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == message_id:
            return i
    return None


def _marks(rows: Sequence[Sequence[Any]], last_pos: int, last_update: float) -> Tuple[int, float]:
    """The highest ``pos`` and ``updated_at`` seen so far."""
    for r in rows:
        last_pos = max(last_pos, int(r[0]))
        last_update = max(last_update, float(r[8]))
    return last_pos, last_update


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise ConfigurationError(f"status must be one of {sorted(STATUSES)}, got {status!r}")
