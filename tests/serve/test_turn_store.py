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
from llama_index_convrag.storage.conversation.base import Citation, Message


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


def test_a_pending_answer_left_by_a_dead_worker_is_interrupted_when_the_claim_is_taken(tmp_path: Path) -> None:
    state = state_with_one_turn(tmp_path)
    _, left = state.store.begin_turn("c", "second")  # its process died: no claim holds the conversation
    state.store.save_partial("c", left.id, "half an ans")
    context = ServedTurn(state).load(TurnRequest("c", "third", window=3))
    kept = state.store.get_message(left.id)
    assert (kept.status, kept.content) == ("interrupted", "half an ans")
    assert [m.content for m in context.history] == ["first", "one", "second", "half an ans"]


def test_the_text_so_far_is_saved_at_most_every_partial_save_s(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import types

    from llama_index_convrag.serve import turn_store
    from llama_index_convrag.serve.state import Limits

    now = [100.0]  # the port's clock, moved by hand
    monkeypatch.setattr(turn_store, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    base = state_with_one_turn(tmp_path)
    state = ServeState(store=base.store, engine_for=base.engine_for, limits=Limits(partial_save_s=1.0))
    port = ServedTurn(state)
    mid = port.load(TurnRequest("c", "second")).placeholder.id

    async def stream() -> list:
        saved, parts = [], []
        for word in ("a ", "b ", "c ", "d "):
            now[0] += 0.6
            parts.append(word)
            await port.aprogress(parts)
            saved.append(state.store.get_message(mid).content)
        return saved

    assert asyncio.run(stream()) == ["", "a b ", "a b ", "a b c d "]  # 0.6 s apart, at most one save a second
    port.commit(TurnOutcome("c", mid, "a b c d e", "complete", None, (), {}))
    now[0] += 5
    asyncio.run(port.aprogress(["late"]))  # after the commit: nothing written
    assert state.store.get_message(mid).content == "a b c d e"


def test_the_load_reads_the_conversation_once_unless_the_claimed_work_may_change_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = state_with_one_turn(tmp_path)
    reads = []
    read = SQLiteConversationStore.get_conversation
    monkeypatch.setattr(SQLiteConversationStore, "get_conversation",
                        lambda self, cid: reads.append(cid) or read(self, cid))
    port = ServedTurn(state)
    context = port.load(TurnRequest("c", "second", window=3))
    assert reads == ["c"] and [m.content for m in context.history] == ["first", "one"]
    port.commit(TurnOutcome("c", context.placeholder.id, "two", "complete", None, (), {}))
    reads.clear()

    def claimed() -> None:  # work under the claim that writes to the conversation
        state.store.add_messages([Message(id="x", conversation_id="c", role="user", content="added")])

    context = ServedTurn(state, claimed=claimed).load(TurnRequest("c", "third", window=5))
    assert reads == ["c", "c"] and [m.content for m in context.history][-1] == "added"
