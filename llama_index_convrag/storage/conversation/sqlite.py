"""SQLite conversation store: the default. WAL mode, safe for many threads and several processes on one file.

One connection per store object guarded by a lock; writes run in ``BEGIN IMMEDIATE`` transactions with a busy
timeout, so processes sharing the file serialise instead of failing. A file that is not SQLite, or a SQLite file
with someone else's tables, is refused with :class:`ConversationStoreError` and left byte-for-byte untouched.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ContextManager, Iterator, List, Optional, Union

from llama_index.core.bridge.pydantic import Field, PrivateAttr

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.storage.conversation._sql import Run, SQLConversationStore
from llama_index_convrag.storage.conversation.base import ConversationStoreError


class SQLiteConversationStore(SQLConversationStore):
    """Conversations in one SQLite file (created on first use)."""

    path: str = Field(description="Path of the SQLite file, or ':memory:'.")
    busy_timeout_s: float = Field(default=30.0, description="How long a writer waits for another process's lock.")

    _conn: Optional[sqlite3.Connection] = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.RLock)

    def __init__(self, path: Union[str, Path], busy_timeout_s: float = 30.0) -> None:
        if busy_timeout_s <= 0:
            raise ConfigurationError(f"busy_timeout_s must be > 0, got {busy_timeout_s!r}")
        super().__init__(path=str(path), busy_timeout_s=busy_timeout_s)
        self._types = {"AUTO": "INTEGER PRIMARY KEY AUTOINCREMENT", "FLOAT": "REAL"}

    @classmethod
    def class_name(cls) -> str:
        return "SQLiteConversationStore"

    def _describe(self) -> str:
        return f"SQLite file {self.path!r}"

    def _connect(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None,
                               check_same_thread=False)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        except sqlite3.DatabaseError as e:
            conn.close()
            raise ConversationStoreError(
                f"{self._describe()} is not a usable SQLite database ({e}); it was left untouched"
            ) from e
        foreign = sorted(t for t in tables if not t.startswith(("convrag_", "sqlite_")))
        if foreign and "convrag_meta" not in tables:
            conn.close()
            raise ConversationStoreError(
                f"{self._describe()} holds tables of another application ({foreign}); refusing to use it"
            )
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        if self.path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        self._conn = conn

    def _change_token(self, run: Run) -> Optional[Any]:
        return run("PRAGMA data_version")[0][0]

    def _cache_guard(self) -> ContextManager[Any]:
        return self._lock

    def _has_meta(self, run: Run) -> bool:
        return bool(run("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'convrag_meta'"))

    @contextmanager
    def _transaction(self, *, migrate: bool = False, write: bool = True) -> Iterator[Run]:
        conn = self._conn
        assert conn is not None

        def run(sql: str, params: Optional[dict] = None) -> List[tuple]:
            return conn.execute(sql, params or {}).fetchall()

        with self._lock:
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.DatabaseError as e:
                raise ConversationStoreError(f"{self._describe()} cannot be written: {e}") from e
            try:
                yield run
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._opened = False
