"""SQLite specifics: WAL, migration on open, refusing corrupted/foreign/newer files untouched, several processes."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from llama_index_convrag.errors import ConversationStoreError
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation._sql import APP_ID, MIGRATIONS, SCHEMA_VERSION
from tests.fakes import run_threads


def test_no_io_in_constructor_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "c.db"
    store = SQLiteConversationStore(path)
    assert not path.exists()
    store.open()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


def test_rejects_bad_timeout() -> None:
    with pytest.raises(ValueError, match=r"busy_timeout_s must be > 0, got 0"):
        SQLiteConversationStore("x.db", busy_timeout_s=0)


def _make_v1(path: Path) -> None:
    conn = sqlite3.connect(path)
    for sql in MIGRATIONS[0]:
        conn.execute(sql.format(AUTO="INTEGER PRIMARY KEY AUTOINCREMENT", FLOAT="REAL"))
    conn.execute("INSERT INTO convrag_meta VALUES ('app', ?), ('schema_version', '1')", (APP_ID,))
    conn.execute("INSERT INTO convrag_messages (id, conversation_id, role, content, status, created_at, updated_at, "
                 "additional_kwargs) VALUES ('m1', 'c', 'user', 'old question', 'complete', 1.0, 1.0, '{}')")
    conn.commit()
    conn.close()


def test_migrates_v1_file_keeping_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    _make_v1(path)
    store = SQLiteConversationStore(path)
    assert store.schema_version() == SCHEMA_VERSION == 6
    [msg] = store.get_conversation("c")
    assert (msg.id, msg.content, msg.error) == ("m1", "old question", None)
    store.put_turn_record("c", "m1", {"ok": True})  # the v2 table exists
    assert store.get_turn_record("m1") == {"ok": True}
    store.close()


def test_refuses_newer_schema_untouched(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteConversationStore(path).open().close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE convrag_meta SET value = '99' WHERE key = 'schema_version'")
    before = path.read_bytes()
    with pytest.raises(ConversationStoreError, match=rf"schema version 99, newer than this code's {SCHEMA_VERSION}"):
        SQLiteConversationStore(path).open()
    assert path.read_bytes() == before


def test_refuses_corrupted_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database\x00" * 200)
    before = path.read_bytes()
    with pytest.raises(ConversationStoreError, match=r"is not a usable SQLite database .*left untouched"):
        SQLiteConversationStore(path).get_conversation("c")
    assert path.read_bytes() == before


def test_refuses_foreign_sqlite_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
        conn.execute("INSERT INTO users VALUES (1)")
    before = path.read_bytes()
    with pytest.raises(ConversationStoreError, match=r"holds tables of another application \(\['users'\]\)"):
        SQLiteConversationStore(path).open()
    assert path.read_bytes() == before


def test_refuses_meta_of_another_app(tmp_path: Path) -> None:
    path = tmp_path / "meta.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE convrag_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO convrag_meta VALUES ('app', 'someone-else')")
    with pytest.raises(ConversationStoreError, match=r"not written by llama-index-convrag"):
        SQLiteConversationStore(path).open()


def _process_worker(path: str, worker: int, turns: int) -> None:
    store = SQLiteConversationStore(path)
    for i in range(turns):
        _, a = store.begin_turn("shared", f"q{worker}-{i}")
        store.finalize_message(a.id, content=f"a{worker}-{i}", status="complete")
    store.close()


def test_several_processes_on_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "multi.db")
    # no pre-open: the processes race to create and migrate the file; BEGIN IMMEDIATE serialises them
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_process_worker, args=(path, w, 30)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    store = SQLiteConversationStore(path)
    msgs = store.get_conversation("shared")
    assert len(msgs) == 180
    for w in range(3):
        mine = [m.content for m in msgs if m.content[1:].startswith(f"{w}-")]
        assert mine == [x for i in range(30) for x in (f"q{w}-{i}", f"a{w}-{i}")]
    store.close()


def test_cached_history_sees_writes_from_another_store_on_the_file(tmp_path: Path) -> None:
    """Two store objects on one file (as two processes): each read reflects the other's inserts, updates, deletes."""
    path = tmp_path / "c.db"
    a, b = SQLiteConversationStore(path), SQLiteConversationStore(path)
    user, answer = a.begin_turn("c1", "first?")
    assert [m.content for m in b.get_conversation("c1")] == ["first?", ""]
    a.finalize_message(answer.id, content="first answer", status="complete")
    assert [(m.content, m.status) for m in b.get_conversation("c1")] == [("first?", "complete"),
                                                                         ("first answer", "complete")]
    b.begin_turn("c1", "second?")
    assert [m.content for m in a.get_conversation("c1")] == ["first?", "first answer", "second?", ""]
    assert [m.content for m in a.get_conversation("c1")] == ["first?", "first answer", "second?", ""]  # cached
    with sqlite3.connect(path) as conn:  # another writer deletes a row
        conn.execute("DELETE FROM convrag_messages WHERE id = ?", (user.id,))
    assert [m.content for m in a.get_conversation("c1")] == ["first answer", "second?", ""]
    a.delete_conversation("c1")
    assert b.get_conversation("c1") == [] and a.get_conversation("c1") == []
    a.close()
    b.close()


def test_cache_updated_by_own_writes_equals_a_fresh_read(tmp_path: Path) -> None:
    """Writes of this store object update its cached history in place (four threads, reads in between): the cache
    stays equal to what a new store reads from the file, JSON round trip of additional_kwargs included."""
    path = tmp_path / "w.db"
    store = SQLiteConversationStore(path)
    errors = []

    def worker(t: int) -> None:
        try:
            for i in range(25):
                cid = f"c{t % 2}"
                store.get_conversation(cid)
                _, a = store.begin_turn(cid, f"q{t}-{i}")
                store.add_message_text(cid, "tool", "x", additional_kwargs={"pair": (t, i)})
                if i % 5 == 4:
                    store.finalize_message(a.id, content="stopped", status="cancelled")
                else:
                    store.finish_turn(cid, a.id, content=f"a{t}-{i}", status="complete", error=None, citations=[],
                                      record={"i": i})
                store.history(cid)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    run_threads(worker, 4)
    assert errors == []
    fresh = SQLiteConversationStore(path)
    for cid in ("c0", "c1"):
        assert len(fresh.get_conversation(cid)) == 150
        assert store.get_conversation(cid) == fresh.get_conversation(cid)
    tools = [m.additional_kwargs["pair"] for m in store.get_conversation("c0") if m.role == "tool"]
    assert len(tools) == 50 and all(isinstance(p, list) for p in tools)  # as read back from JSON
    store.close()
    fresh.close()


def test_unchanged_history_is_served_without_reading_rows(tmp_path: Path) -> None:
    """While no other connection commits, reads after this store's own writes touch no message row; a commit by
    another store object makes the next read go to the table."""
    path = tmp_path / "t.db"
    store, other = SQLiteConversationStore(path), SQLiteConversationStore(path)
    store.begin_turn("c", "q1")
    store.get_conversation("c")
    statements: list = []
    store.open()
    assert store._conn is not None
    store._conn.set_trace_callback(statements.append)
    _, a = store.begin_turn("c", "q2")
    store.finish_turn("c", a.id, content="a2", status="complete", error=None, citations=[], record={})
    assert [m.content for m in store.history("c")] == ["q1", "q2", "a2"]
    def history_reads() -> list:
        return [s for s in statements if "FROM convrag_messages WHERE conversation_id" in s]

    assert history_reads() == []
    other.begin_turn("c", "q3")
    assert [m.content for m in store.history("c")] == ["q1", "q2", "a2", "q3"]
    assert history_reads() != []
    store.close()
    other.close()


def test_with_closes_the_store_on_the_way_out_even_after_an_error(tmp_path: Path) -> None:
    store = SQLiteConversationStore(tmp_path / "c.db")
    with store as opened:
        assert opened is store
        opened.begin_turn("c1", "kept?")
        assert store._conn is not None
    assert store._conn is None and not store._opened
    with pytest.raises(RuntimeError, match="inside"):
        with store:
            store.begin_turn("c1", "again")
            raise RuntimeError("inside")
    assert store._conn is None
    with SQLiteConversationStore(tmp_path / "c.db") as reopened:
        assert [m.content for m in reopened.get_conversation("c1") if m.role == "user"] == ["kept?", "again"]
