"""Knowledge bases, members and users in the store, against SQLite and a real PostgreSQL server."""

from __future__ import annotations

from typing import Callable

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.storage.conversation._sql import SQLConversationStore
from llama_index_convrag.storage.conversation.knowledge import EVERYONE, at_least, stronger

Make = Callable[[], SQLConversationStore]


def test_a_knowledge_base_has_an_owner_and_members(make_store: Make) -> None:
    store = make_store()
    kb = store.create_knowledge_base("team-docs", "alice", description="the team's notes")
    assert kb.collection == f"kb_{kb.id}" and kb.owner == "alice" and kb.roots == ()
    assert store.role_in(kb.id, "alice") == "owner" and store.role_in(kb.id, "bob") is None
    store.set_member(kb.id, "bob", "reader")
    store.set_member(kb.id, "carol", "editor")
    again = make_store()
    assert [(m.user_id, m.role) for m in again.members(kb.id)] == [("alice", "owner"), ("bob", "reader"),
                                                                   ("carol", "editor")]
    assert again.knowledge_base(kb.id) == kb == again.knowledge_base_named("team-docs")
    assert again.knowledge_base_of_collection(kb.collection) == kb
    store.set_member(kb.id, "bob", "editor")  # replaces the earlier role
    assert store.role_in(kb.id, "bob") == "editor"
    assert store.remove_member(kb.id, "bob") and not store.remove_member(kb.id, "bob")
    assert not store.remove_member(kb.id, "alice")  # never the owner
    with pytest.raises(ConfigurationError, match="'alice' owns this knowledge base"):
        store.set_member(kb.id, "alice", "reader")
    with pytest.raises(ConfigurationError, match=r"role must be one of \['reader', 'editor'\], got 'owner'"):
        store.set_member(kb.id, "dave", "owner")


def test_everyone_reads_a_shared_base_and_the_stronger_role_wins(make_store: Make) -> None:
    store = make_store()
    corpus = store.create_knowledge_base("corpus", "local", collection="convrag_docs", readers=[EVERYONE])
    private = store.create_knowledge_base("private", "alice")
    assert store.role_in(corpus.id, "anyone") == "reader"
    store.set_member(corpus.id, "bob", "editor")
    assert store.role_in(corpus.id, "bob") == "editor"
    assert [(kb.name, role) for kb, role in store.knowledge_bases_of("bob")] == [("corpus", "editor")]
    assert [(kb.name, role) for kb, role in store.knowledge_bases_of("alice")] == [("corpus", "reader"),
                                                                                 ("private", "owner")]
    assert [kb.name for kb in store.list_knowledge_bases()] == ["corpus", "private"]
    assert store.delete_knowledge_base(private.id) and not store.delete_knowledge_base(private.id)
    assert store.role_in(private.id, "alice") is None and store.knowledge_base(private.id) is None


def test_names_are_checked_and_unique(make_store: Make) -> None:
    store = make_store()
    kb = store.create_knowledge_base("docs", "alice")
    with pytest.raises(ConfigurationError, match="a knowledge base with the name 'docs' exists"):
        store.create_knowledge_base("docs", "bob")
    for bad in ("", "has space", "a/b", "_hidden", "x" * 65):
        with pytest.raises(ConfigurationError, match="knowledge base name .* must match"):
            store.create_knowledge_base(bad, "alice")
    with pytest.raises(ConfigurationError, match="user id 'a b' must be 1 to 128 characters"):
        store.set_member(kb.id, "a b", "reader")
    store.create_knowledge_base("文档", "alice")  # letters of any script
    renamed = store.update_knowledge_base(kb.id, name="docs2", description="d", roots=["/srv/docs"])
    assert (renamed.name, renamed.description, renamed.roots) == ("docs2", "d", ("/srv/docs",))
    with pytest.raises(ConfigurationError, match="a knowledge base with the name '文档' exists"):
        store.update_knowledge_base(kb.id, name="文档")


def test_users_and_roles(make_store: Make) -> None:
    store = make_store()
    assert store.user("alice") is None
    assert store.ensure_user("alice").role == "member"
    assert store.ensure_user("alice", role="admin").role == "admin"
    assert make_store().user("alice").role == "admin"
    with pytest.raises(ConfigurationError, match=r"role must be one of \['member', 'admin'\], got 'root'"):
        store.ensure_user("alice", role="root")
    assert [u.id for u in store.list_users()] == ["alice"]


def test_role_order() -> None:
    assert stronger("reader", "editor") == "editor" and stronger(None, "reader") == "reader"
    assert at_least("owner", "editor") and not at_least("reader", "editor") and not at_least(None, "reader")


def test_a_base_and_a_role_in_one_read(make_store: Make) -> None:
    store = make_store()
    kb = store.create_knowledge_base("docs", "alice", readers=[EVERYONE])
    store.set_member(kb.id, "bob", "editor")
    assert store.knowledge_base_with_role(kb.id, "bob") == (kb, "editor")
    assert store.knowledge_base_with_role(kb.id, "carol") == (kb, "reader")
    assert store.knowledge_base_with_role(kb.id, "alice") == (kb, "owner")
    assert store.knowledge_base_with_role("nope", "bob") == (None, None)
    private = store.create_knowledge_base("private", "alice")
    assert store.knowledge_base_with_role(private.id, "bob") == (private, None)
