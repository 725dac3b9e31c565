"""Conversation store fixtures: SQLite files in tmp_path and a real PostgreSQL server started for the session.

PostgreSQL: needs ``initdb``/``pg_ctl`` on PATH; as root the server runs as the ``postgres`` (or ``nobody``) user
via ``runuser``. Tests that need it skip with the reason when it cannot start.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, List

import pytest

from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation.base import ConversationStore


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_user() -> List[str]:
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return ["runuser", "-u", name, "--"]
    raise RuntimeError("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as")


class PostgresServer:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="convrag-pg-"))
        self.port = _free_port()
        self.prefix = _as_user()
        self._dbs = itertools.count()
        if self.prefix:
            shutil.chown(self.dir, user=self.prefix[2])

    def _run(self, *args: str) -> None:
        subprocess.run([*self.prefix, *args], check=True, capture_output=True, timeout=60)

    def start(self) -> "PostgresServer":
        data = str(self.dir / "data")
        self._run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self._run("pg_ctl", "-D", data, "-l", str(self.dir / "log"), "-w", "start", "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -F")
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        import sqlalchemy as sa

        name = f"convrag_t{next(self._dbs)}"
        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {name}"))
        engine.dispose()
        return self.url(name)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the session; dependent tests skip with the reason if it cannot start."""
    reason = None
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        reason = "initdb/pg_ctl not on PATH (install Debian 'postgresql')"
    else:
        try:
            import psycopg  # noqa: F401
            import sqlalchemy  # noqa: F401
        except ImportError as e:
            reason = f"postgres extra not installed: {e}"
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer()
    try:
        server.start()
    except Exception as e:  # noqa: BLE001
        shutil.rmtree(server.dir, ignore_errors=True)
        pytest.skip(f"PostgreSQL could not start: {e}")
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    return postgres_server.new_database()


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], ConversationStore]]:
    """A factory of stores on ONE database (call twice to 'reopen'); parametrized over both backends."""
    opened: List[Any] = []
    if request.param == "sqlite":
        path = tmp_path / "conv.db"

        def make() -> ConversationStore:
            opened.append(SQLiteConversationStore(path))
            return opened[-1]
    else:
        url = request.getfixturevalue("pg_url")
        from llama_index_convrag.storage.conversation.postgres import PostgresConversationStore

        def make() -> ConversationStore:
            opened.append(PostgresConversationStore(url))
            return opened[-1]

    yield make
    for s in opened:
        s.close()


def rewind_sqlite(path: Path, version: int) -> None:
    """Take a current SQLite file back to what schema ``version`` held: undo the later migration steps, newest
    first (created tables and indexes dropped, added columns removed; rows a step inserted into a kept table
    stay), and record ``version``. The steps are read from the migrations themselves, so every step is covered."""
    from llama_index_convrag.storage.conversation._sql import MIGRATIONS

    conn = sqlite3.connect(path)
    for step in reversed(MIGRATIONS[version:]):
        for sql in reversed(step):
            words = sql.split()
            if words[:2] == ["CREATE", "TABLE"]:
                conn.execute(f"DROP TABLE {words[2]}")
            elif words[:2] == ["CREATE", "INDEX"]:
                conn.execute(f"DROP INDEX IF EXISTS {words[2]}")  # gone already when its table was dropped
            elif words[:2] == ["ALTER", "TABLE"] and words[3:5] == ["ADD", "COLUMN"]:
                exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                      (words[2],)).fetchone()
                if exists:
                    conn.execute(f"ALTER TABLE {words[2]} DROP COLUMN {words[5]}")
    conn.execute("UPDATE convrag_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.commit()
    conn.close()
