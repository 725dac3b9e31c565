"""What ``convrag serve`` stores beside messages (owners, titles, pages, keys, feedback, turn claims, answer
versions), against SQLite and a real PostgreSQL server; and the v2 -> v3 migration of an existing file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.storage.conversation._sql import SCHEMA_VERSION
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation._sql import SQLConversationStore
from llama_index_convrag.storage.conversation.base import Citation
from llama_index_convrag.storage.conversation.accounts import hash_key

Make = Callable[[], SQLConversationStore]


def test_owners_titles_and_pages(make_store: Make) -> None:
    store = make_store()
    made = [store.create_conversation("alice", f"t{i}") for i in range(5)]
    store.create_conversation("bob", "other")
    assert store.conversation_info(made[0].id, owner="bob") is None
    assert store.conversation_info(made[0].id, owner="alice").title == "t0"
    seen, cursor = [], None
    while True:
        page, cursor = store.list_owned("alice", 2, cursor)
        assert len(page) <= 2
        seen += [c.id for c in page]
        if cursor is None:
            break
    assert seen == [c.id for c in reversed(made)]  # newest first, each once
    store.rename_conversation(made[1].id, "renamed")
    assert make_store().conversation_info(made[1].id).title == "renamed"
    with pytest.raises(ConfigurationError, match="cursor 'zz' is not a page cursor"):
        store.list_owned("alice", 2, "zz")
    store.begin_turn(made[2].id, "q")
    assert store.conversation_info(made[2].id).message_count == 2
    store.delete_conversation(made[2].id)
    assert store.conversation_info(made[2].id) is None


def test_engine_written_conversations_belong_to_local(make_store: Make) -> None:
    store = make_store()
    store.begin_turn("c-cli", "from convrag chat")
    assert store.conversation_info("c-cli", owner="local") is not None


def test_keys_hashed_and_revoked(make_store: Make) -> None:
    store = make_store()
    assert not store.has_active_keys()
    key, secret = store.create_key("alice")
    assert store.has_active_keys() and store.user_for_key(secret) == "alice"
    assert store.user_for_key(secret + "x") is None
    listed = make_store().list_keys()
    assert [(k.id, k.user_id, k.prefix) for k in listed] == [(key.id, "alice", secret[:10])]
    assert store.revoke_key(key.id) and not store.revoke_key(key.id)
    assert store.user_for_key(secret) is None and not store.has_active_keys()
    with pytest.raises(ConfigurationError, match="user_id must be a non-empty name"):
        store.create_key(" ")
    assert len(hash_key(secret)) == 64 and hash_key(secret) != secret


def test_feedback_per_user_and_message(make_store: Make) -> None:
    store = make_store()
    _, answer = store.begin_turn("c1", "q")
    store.put_feedback(answer.id, "alice", "up", None)
    store.put_feedback(answer.id, "alice", "down", "wrong")
    got = make_store().get_feedback(answer.id, "alice")
    assert (got.rating, got.text) == ("down", "wrong") and store.get_feedback(answer.id, "bob") is None
    with pytest.raises(ConfigurationError, match=r"rating must be one of \['up', 'down'\], got 'meh'"):
        store.put_feedback(answer.id, "alice", "meh", None)


def test_feedback_and_citations_of_many_messages_at_once(make_store: Make) -> None:
    store = make_store()
    answers = [store.begin_turn("c1", f"q{i}")[1] for i in range(3)]
    cites = [Citation(node_id=f"n{i}", source_index=i, marker=i + 1, text=f"t{i}") for i in range(2)]
    store.finish_turn("c1", answers[1].id, content="a", status="complete", error=None, citations=cites, record={})
    store.put_feedback(answers[0].id, "alice", "up", "good")
    store.put_feedback(answers[0].id, "bob", "down", None)
    ids = [a.id for a in answers]
    got = store.get_citations_of(ids)
    assert list(got) == ids and got[answers[0].id] == [] and got[answers[2].id] == []
    assert [(c.node_id, c.marker) for c in got[answers[1].id]] == [("n0", 1), ("n1", 2)]
    assert got[answers[1].id] == store.get_citations(answers[1].id)
    feedback = store.get_feedback_of(ids, "alice")
    assert list(feedback) == [answers[0].id] and (feedback[answers[0].id].rating, feedback[answers[0].id].text) == (
        "up", "good")
    assert store.get_citations_of([]) == {} and store.get_feedback_of([], "alice") == {}
    assert list(store.get_citations_of([answers[0].id] * 2)) == [answers[0].id]


def test_turn_claim_is_exclusive_until_released_or_expired(make_store: Make) -> None:
    a, b = make_store(), make_store()
    cid = a.create_conversation("alice").id
    assert a.claim_turn(cid, 60) and not b.claim_turn(cid, 60)
    a.release_turn(cid)
    assert b.claim_turn(cid, 0.000001)
    assert a.claim_turn(cid, 60)  # the first claim expired (a worker that died)


def test_regeneration_versions_leave_history(make_store: Make) -> None:
    store = make_store()
    user, first = store.begin_turn("c1", "q")
    store.finalize_message(first.id, content="partial", status="cancelled")
    assert [m.content for m in store.history("c1")] == ["q", "partial"]
    second = store.begin_regeneration(user)
    assert (second.reply_to, second.version, second.status) == (user.id, 2, "pending")
    store.finalize_message(second.id, content="full", status="complete")
    again = make_store()
    msgs = again.get_conversation("c1")
    assert [(m.content, m.version, m.superseded_by) for m in msgs] == [
        ("q", 1, None), ("partial", 1, second.id), ("full", 2, None)]
    assert [m.content for m in again.history("c1")] == ["q", "full"]


def test_v2_file_migrates_with_owner_local(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    store = SQLiteConversationStore(path)
    store.begin_turn("old", "kept?")
    store.close()
    conn = sqlite3.connect(path)  # back to what a v2 file holds
    for table in ("convrag_conversations", "convrag_keys", "convrag_feedback", "convrag_views"):
        conn.execute(f"DROP TABLE {table}")
    for column in ("reply_to", "version", "superseded_by"):
        conn.execute(f"ALTER TABLE convrag_messages DROP COLUMN {column}")
    conn.execute("UPDATE convrag_meta SET value = '2' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    migrated = SQLiteConversationStore(path)
    assert migrated.schema_version() == SCHEMA_VERSION == 4
    assert [m.content for m in migrated.get_conversation("old")] == ["kept?", ""]
    assert migrated.conversation_info("old", owner="local").message_count == 2
    migrated.close()
