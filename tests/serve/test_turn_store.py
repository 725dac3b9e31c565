"""``ServedTurn``: the engine's port with the service's work in the same two store calls: ``load`` checks, claims
and stores the turn (409 while another turn holds the conversation), ``commit`` writes and releases, ``close``
finalises what was never committed; a regeneration answers the same question as its next version. A real SQLite
store."""

from __future__ import annotations

from pathlib import Path

import pytest

from llama_index_convrag.chat.port import TurnOutcome, TurnRequest
from llama_index_convrag.serve.errors import APIError
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.serve.turn_store import ServedTurn
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation.base import Citation


def state_with_one_turn(tmp_path: Path) -> ServeState:
    store = SQLiteConversationStore(tmp_path / "chats.db")
    _, answer = store.begin_turn("c", "first")
    store.finalize_message(answer.id, content="one", status="complete")
    return ServeState(store=store, engine_for=lambda cid, port: None)


def test_load_claims_and_stores_then_commit_writes_and_releases(tmp_path: Path) -> None:
    state = state_with_one_turn(tmp_path)
    store, checked = state.store, []
    port = ServedTurn(state, check=lambda: checked.append("key and owner"))
    context = port.load(TurnRequest("c", "second", window=3))
    assert checked == ["key and owner"]
    assert [(m.role, m.status) for m in store.get_conversation("c")][2:] == [("user", "complete"),
                                                                              ("assistant", "pending")]
    assert [m.content for m in context.history] == ["first", "one"]
    with pytest.raises(APIError) as busy:  # the claim holds until the commit
        ServedTurn(state).load(TurnRequest("c", "third"))
    assert (busy.value.status, busy.value.code) == (409, "turn_in_flight")
    cite = Citation(node_id="n", source_index=0, marker=1, text="t")
    outcome = TurnOutcome("c", context.placeholder.id, "two", "complete", None, (cite,), {"k": 1})
    port.commit(outcome)
    assert (store.get_message(context.placeholder.id).content, store.get_citations(context.placeholder.id)) == (
        "two", [cite])
    assert store.get_turn_record(context.placeholder.id) == {"k": 1}
    assert port.close() is outcome and port.committed is outcome  # nothing more written
    assert ServedTurn(state).load(TurnRequest("c", "third")).user.content == "third"  # released


def test_close_without_a_commit_leaves_the_placeholder_cancelled_and_releases(tmp_path: Path) -> None:
    state = state_with_one_turn(tmp_path)
    port = ServedTurn(state)
    context = port.load(TurnRequest("c", "second"))
    assert port.close().status == "cancelled"
    stored = state.store.get_message(context.placeholder.id)
    assert (stored.status, stored.content) == ("cancelled", "")
    assert ServedTurn(state).load(TurnRequest("c", "third")) is not None


def test_a_failed_check_stores_nothing_and_claims_nothing(tmp_path: Path) -> None:
    state = state_with_one_turn(tmp_path)

    def refuse() -> None:
        raise APIError(404, "not_found", "no conversation with id 'c'")

    with pytest.raises(APIError):
        ServedTurn(state, check=refuse).load(TurnRequest("c", "second"))
    with pytest.raises(APIError):
        ServedTurn(state, claimed=refuse).load(TurnRequest("c", "second"))
    assert len(state.store.get_conversation("c")) == 2
    assert ServedTurn(state).load(TurnRequest("c", "second")) is not None  # the claim was released


def test_regeneration_answers_the_same_question_as_its_next_version(tmp_path: Path) -> None:
    state = state_with_one_turn(tmp_path)
    first_user = state.store.get_conversation("c")[0]
    context = ServedTurn(state, regenerate=first_user).load(TurnRequest("c", first_user.content))
    assert context.user == first_user and (context.placeholder.reply_to, context.placeholder.version) == (
        first_user.id, 2)
    assert context.history == []  # the conversation before the regenerated question
