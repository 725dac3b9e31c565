"""``TurnStore``: ``prepare`` stores the turn before the engine begins, the engine's ``begin_turn`` and history read
touch no database, ``finish_turn`` waits for ``flush``; without ``prepare`` it writes through. A real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

from llama_index_convrag.serve.turn_store import Finished, TurnStore
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation.base import Citation, Message


def store_with_one_turn(tmp_path: Path) -> SQLiteConversationStore:
    store = SQLiteConversationStore(tmp_path / "chats.db")
    _, answer = store.begin_turn("c", "first")
    store.finalize_message(answer.id, content="one", status="complete")
    return store


def test_prepare_then_engine_calls_then_flush(tmp_path: Path) -> None:
    inner = store_with_one_turn(tmp_path)
    turn = TurnStore(inner)
    user, placeholder = turn.prepare("c", "second")
    assert [(m.role, m.status) for m in inner.get_conversation("c")][2:] == [("user", "complete"),
                                                                              ("assistant", "pending")]
    assert [m.content for m in turn.history("c")] == ["first", "one"]  # the snapshot before the turn
    assert turn.begin_turn("c", "second") == (user, placeholder)
    assert len(inner.get_conversation("c")) == 4  # nothing stored twice
    assert [m.content for m in turn.history("c")] == ["first", "one", "second"]  # later reads: the store
    cite = Citation(node_id="n", source_index=0, marker=1, text="t")
    turn.finish_turn("c", placeholder.id, content="two", status="complete", error=None, citations=[cite],
                     record={"k": 1})
    assert inner.get_message(placeholder.id).status == "pending"  # held until flush
    assert turn.flush() == Finished(content="two", status="complete", error=None, citations=(cite,))
    assert (inner.get_message(placeholder.id).content, inner.get_citations(placeholder.id)) == ("two", [cite])
    assert inner.get_turn_record(placeholder.id) == {"k": 1}
    assert turn.flush() is turn.finished  # once


def test_flush_without_an_answer_leaves_the_placeholder_cancelled(tmp_path: Path) -> None:
    inner = store_with_one_turn(tmp_path)
    turn = TurnStore(inner)
    _, placeholder = turn.prepare("c", "second")
    assert turn.flush().status == "cancelled"
    stored = inner.get_message(placeholder.id)
    assert (stored.status, stored.content) == ("cancelled", "")


def test_regeneration_answers_the_same_question_as_its_next_version(tmp_path: Path) -> None:
    inner = store_with_one_turn(tmp_path)
    first_user = inner.get_conversation("c")[0]
    turn = TurnStore(inner, regenerate=first_user)
    user, placeholder = turn.prepare("c", first_user.content)
    assert user == first_user and (placeholder.reply_to, placeholder.version) == (first_user.id, 2)
    assert turn.history("c") == []  # the conversation before the regenerated question


def test_without_prepare_it_writes_through_and_reports_the_ids(tmp_path: Path) -> None:
    inner = store_with_one_turn(tmp_path)
    began: List[Tuple[Message, Message]] = []
    turn = TurnStore(inner, lambda u, p: began.append((u, p)))
    user, placeholder = turn.begin_turn("c", "second")
    assert began == [(user, placeholder)]
    turn.finish_turn("c", placeholder.id, content="two", status="complete", error=None, citations=[], record={})
    assert inner.get_message(placeholder.id).status == "complete" and turn.finished is None
