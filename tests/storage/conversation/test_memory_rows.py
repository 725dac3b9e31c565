"""Memory rows (versioned summaries, user facts) against SQLite and a real PostgreSQL server: versions, owners,
history of replaced facts, deletion."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

import pytest

from llama_index_convrag.errors import ConfigurationError, RecordNotFoundError
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation._sql import MIGRATIONS, SCHEMA_VERSION, SQLConversationStore
from llama_index_convrag.storage.conversation.memory_rows import MEMORY_MIGRATION
from tests.storage.conversation.conftest import rewind_sqlite

Make = Callable[[], SQLConversationStore]


def test_summary_versions_are_the_owners_and_survive_reopening(make_store: Make) -> None:
    store = make_store()
    conv = store.create_conversation("alice").id
    first = store.put_summary("alice", conv, "Alice likes tea.", covers_to="m4", covered=4, tokens=5, source="llm")
    second = store.put_summary("alice", conv, "Alice likes green tea.", covers_to="m8", covered=8, tokens=6,
                               source="edit")
    assert (first.version, second.version) == (1, 2)
    reopened = make_store()
    latest = reopened.get_summary("alice", conv)
    assert (latest.text, latest.version, latest.covers_to, latest.covered, latest.source) == (
        "Alice likes green tea.", 2, "m8", 8, "edit")
    assert reopened.get_summary("alice", conv, version=1).text == "Alice likes tea."
    assert [v.version for v in reopened.list_summaries("alice", conv)] == [1, 2]
    assert reopened.get_summary("bob", conv) is None
    assert reopened.list_summaries("bob", conv) == []
    assert reopened.clear_summary("bob", conv) == 0
    with pytest.raises(RecordNotFoundError):
        reopened.put_summary("bob", conv, "mine now", covers_to=None, covered=0, tokens=2, source="edit")
    assert reopened.clear_summary("alice", conv) == 2
    assert reopened.get_summary("alice", conv) is None


def test_summary_arguments_are_checked(make_store: Make) -> None:
    store = make_store()
    conv = store.create_conversation("alice").id
    with pytest.raises(ConfigurationError, match=r"source must be one of \['llm', 'salient', 'edit'\], got 'x'"):
        store.put_summary("alice", conv, "t", covers_to=None, covered=0, tokens=1, source="x")
    with pytest.raises(ConfigurationError, match="covered must be an int >= 0, got -1"):
        store.put_summary("alice", conv, "t", covers_to=None, covered=-1, tokens=1, source="llm")


def test_deleting_a_conversation_deletes_its_summaries(make_store: Make) -> None:
    store = make_store()
    conv = store.create_conversation("alice").id
    store.begin_turn(conv, "hello")
    store.put_summary("alice", conv, "s", covers_to=None, covered=1, tokens=1, source="llm")
    store.delete_conversation(conv)
    assert store.list_summaries("alice", conv) == []


def test_facts_are_scoped_to_their_owner_and_keep_their_history(make_store: Make) -> None:
    store = make_store()
    tea = store.add_fact("alice", " Alice likes tea ", source_message_id="m1", conversation_id="c1",
                         embedding=[0.5, 0.25])
    store.add_fact("bob", "Bob has a dog", source_message_id="m9")
    assert [f.text for f in store.list_facts("alice")] == ["Alice likes tea"]
    coffee = store.add_fact("alice", "Alice prefers coffee now", source_message_id="m7", replaces=tea.id)
    reopened = make_store()
    assert [f.text for f in reopened.list_facts("alice")] == ["Alice prefers coffee now"]
    history = {f.id: f for f in reopened.list_facts("alice", include_history=True)}
    assert history[tea.id].status == "replaced" and history[tea.id].replaced_by == coffee.id
    assert history[coffee.id].replaces == tea.id and history[coffee.id].source_message_id == "m7"
    assert history[tea.id].embedding == [0.5, 0.25]
    assert reopened.get_fact("bob", coffee.id) is None
    assert reopened.delete_fact("bob", coffee.id) is False
    with pytest.raises(RecordNotFoundError):
        reopened.add_fact("bob", "steal", replaces=coffee.id)
    assert reopened.retract_fact("bob", coffee.id) is False
    assert reopened.retract_fact("alice", coffee.id) is True
    assert reopened.list_facts("alice") == []
    assert reopened.delete_fact("alice", coffee.id) is True
    assert reopened.list_facts("alice", include_history=True) == []  # the whole chain
    assert [f.text for f in reopened.list_facts("bob")] == ["Bob has a dog"]
    assert reopened.delete_facts("bob") == 1


def test_a_fact_needs_text(make_store: Make) -> None:
    with pytest.raises(ConfigurationError, match="a fact's text must be a non-empty string, got '  '"):
        make_store().add_fact("alice", "  ")


def test_a_v5_file_gains_the_memory_rows_keeping_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    store = SQLiteConversationStore(path)
    conv = store.create_conversation("alice").id
    store.begin_turn(conv, "kept?")
    store.close()
    rewind_sqlite(path, 5)  # what a file of the schema before memory rows holds
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {"convrag_summaries", "convrag_facts"} & tables
    migrated = SQLiteConversationStore(path)
    assert migrated.schema_version() == SCHEMA_VERSION == 6 and MIGRATIONS[5] == MEMORY_MIGRATION
    assert [m.content for m in migrated.get_conversation(conv)] == ["kept?", ""]
    assert migrated.put_summary("alice", conv, "Alice asked.", covers_to=None, covered=0, tokens=3,
                                source="edit").version == 1
    fact = migrated.add_fact("alice", "Alice likes tea.")
    assert [f.id for f in migrated.list_facts("alice")] == [fact.id]
    migrated.close()
