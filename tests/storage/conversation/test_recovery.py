import subprocess
import sys
import textwrap

import pytest

from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation.recovery import (ABANDONED_ERROR, StoreLease, open_lease,
                                                               release_leases)


@pytest.fixture(autouse=True)
def _release():
    yield
    release_leases()


def _pending_store(path):
    store = SQLiteConversationStore(path)
    store.begin_turn("c1", "What is BM25?")
    return store


def test_alone_marks_pending_placeholders_interrupted_and_keeps_the_question(tmp_path):
    path = tmp_path / "chats.db"
    store = _pending_store(path)
    _, recovered = open_lease(store, path)
    assert len(recovered) == 1
    user, answer = store.get_conversation("c1")
    assert (user.role, user.content, user.status) == ("user", "What is BM25?", "complete")
    assert (answer.status, answer.error) == ("interrupted", ABANDONED_ERROR)
    assert store.history("c1") == [user]


def test_another_live_process_keeps_its_placeholders_pending(tmp_path):
    path = tmp_path / "chats.db"
    store = _pending_store(path)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, sys, time
        f = open({str(path) + '.lock'!r}, 'ab'); fcntl.flock(f.fileno(), fcntl.LOCK_SH)
        print('held', flush=True); sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        _, recovered = open_lease(store, path)
        assert recovered == [] and store.get_conversation("c1")[1].status == "pending"
    finally:
        holder.stdin.close()
        holder.wait()


def test_lease_is_exclusive_only_when_alone(tmp_path):
    a, b = StoreLease(tmp_path / "s.db"), StoreLease(tmp_path / "s.db")
    assert a.acquire() is True
    a.share()
    assert b.acquire() is False
    a.release()
    b.release()
