"""What ``convrag serve`` stores beside messages (owners, titles, pages, keys, feedback, turn claims, answer
versions), against SQLite and a real PostgreSQL server; and the migration of existing v2, v3 and v4 files."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from llama_index.core.base.llms.types import ChatMessage

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation._sql import SCHEMA_VERSION, SQLConversationStore
from llama_index_convrag.storage.conversation.base import Citation
from llama_index_convrag.storage.conversation.accounts import Principal, hash_key
from tests.storage.conversation.conftest import rewind_sqlite

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


def test_keys_carry_scopes_and_admin_needs_an_admin_user(make_store: Make) -> None:
    store = make_store()
    chat_key, chat = store.create_key("bob", scopes=["chat"])
    assert store.principal_for_key(chat) == Principal("bob", ("chat",), admin=False, key_id=chat_key.id)
    with pytest.raises(ConfigurationError, match="the admin scope needs an admin user; 'bob' is a member"):
        store.create_key("bob", scopes=["admin", "chat"])
    with pytest.raises(ConfigurationError, match=r"scopes must be a non-empty subset of \['chat', 'edit', 'admin'\], "
                                                 r"got \['root'\]"):
        store.create_key("bob", scopes=["root"])
    store.ensure_user("bob", role="admin")
    key, secret = store.create_key("bob", scopes=["admin", "chat"])
    who = make_store().principal_for_key(secret)
    assert who is not None and who.scopes == ("chat", "admin") and who.admin and who.can("admin")
    store.ensure_user("bob", role="member")  # demoted: the key keeps its scope, the user no longer has the role
    assert not store.principal_for_key(secret).can("admin")
    assert [k.scopes for k in store.list_keys("bob")] == [("chat",), ("chat", "admin")]


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


def test_v2_file_migrates_to_the_current_schema_with_owner_local(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    store = SQLiteConversationStore(path)
    store.begin_turn("old", "kept?")
    store.close()
    rewind_sqlite(path, 2)  # back to what a v2 file holds
    migrated = SQLiteConversationStore(path)
    assert migrated.schema_version() == SCHEMA_VERSION == 6  # every later step ran
    assert [m.content for m in migrated.get_conversation("old")] == ["kept?", ""]
    info = migrated.conversation_info("old", owner="local")
    assert (info.message_count, info.kb_id) == (2, None)
    migrated.close()


@pytest.mark.parametrize("version", [3, 4])
def test_v3_and_v4_files_migrate_with_keys_on_the_default_scopes(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    store = SQLiteConversationStore(path)
    _, secret = store.create_key("alice")
    store.add_message("viewed", ChatMessage(role="user", content="stored"))
    store.set_messages("viewed", [ChatMessage(role="user", content="rewritten")])
    store.close()
    rewind_sqlite(path, version)  # back to what a v3 or v4 file holds (v4 added convrag_views)
    migrated = SQLiteConversationStore(path)
    assert migrated.schema_version() == SCHEMA_VERSION == 6
    assert migrated.principal_for_key(secret) == Principal(user_id="alice", scopes=("chat", "edit"), admin=False,
                                                           key_id=migrated.list_keys()[0].id)
    assert [(u.id, u.role) for u in migrated.list_users()] == [("alice", "member")]
    # a v4 file keeps its memory's view; a v3 file never had one, so the conversation itself is read
    assert [m.content for m in migrated.get_messages("viewed")] == ["rewritten" if version == 4 else "stored"]
    migrated.close()
