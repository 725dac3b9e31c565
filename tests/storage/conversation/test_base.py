"""The ConversationStore contract, run against SQLite and a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import json
from typing import Callable

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import ChatMemoryBuffer

from llama_index_convrag.storage.conversation._sql import SCHEMA_VERSION
from llama_index_convrag.storage.conversation import Citation, ConversationStore
from tests.fakes import run_threads

Make = Callable[[], ConversationStore]


def test_turn_lifecycle_and_history(make_store: Make) -> None:
    store = make_store()
    user, placeholder = store.begin_turn("c1", "Who directed Inception?")
    assert store.get_message(placeholder.id).status == "pending"
    assert [m.role for m in store.history("c1")] == ["user"]  # an unfinished answer is not history
    store.finalize_message(placeholder.id, content="Nolan.", status="complete")
    u2, p2 = store.begin_turn("c1", "And it?")
    store.finalize_message(p2.id, content="par", status="error", error="RuntimeError: boom")

    reopened = make_store()
    msgs = reopened.get_conversation("c1")
    assert [(m.role, m.content, m.status) for m in msgs] == [
        ("user", "Who directed Inception?", "complete"), ("assistant", "Nolan.", "complete"),
        ("user", "And it?", "complete"), ("assistant", "par", "error")]
    assert msgs[3].error == "RuntimeError: boom"
    assert [m.content for m in reopened.history("c1")] == ["Who directed Inception?", "Nolan.", "And it?"]
    assert reopened.schema_version() == SCHEMA_VERSION == 4


def test_history_keeps_the_partial_text_of_a_stopped_answer(make_store: Make) -> None:
    store = make_store()
    _, stopped = store.begin_turn("c1", "Who directed Inception?")
    store.finalize_message(stopped.id, content="Christopher", status="cancelled")
    _, empty = store.begin_turn("c1", "And Tenet?")
    store.finalize_message(empty.id, content="", status="cancelled")
    assert [(m.role, m.content) for m in store.history("c1")] == [
        ("user", "Who directed Inception?"), ("assistant", "Christopher"), ("user", "And Tenet?")]


def test_citations_by_message_id_after_reopen(make_store: Make) -> None:
    store = make_store()
    _, a = store.begin_turn("c", "q")
    cites = [Citation(node_id="n1", source_index=0, marker=1, ref_doc_id="d1", score=0.9,
                      stage_scores=[{"stage": "dense", "rank": 1, "score": 0.9}], text="t1"),
             Citation(node_id="n2", source_index=1)]
    store.put_citations(a.id, cites)
    store.finalize_message(a.id, content="x [1]", status="complete")
    reopened = make_store()
    assert reopened.get_citations(a.id) == cites
    assert reopened.get_message(a.id).additional_kwargs == {}
    assert all(m.additional_kwargs == {} for m in reopened.get_messages("c"))
    store.put_citations(a.id, cites[:1])  # replace, not append
    assert make_store().get_citations(a.id) == cites[:1]


def test_turn_records(make_store: Make) -> None:
    store = make_store()
    _, a1 = store.begin_turn("c", "q1")
    _, a2 = store.begin_turn("c", "q2")
    store.put_turn_record("c", a2.id, {"n": 2})
    store.put_turn_record("c", a1.id, {"n": 1})
    store.put_turn_record("c", a1.id, {"n": 11})
    assert make_store().get_turn_record(a1.id) == {"n": 11}
    assert [r["n"] for r in store.list_turn_records("c")] == [11, 2]
    assert store.get_turn_record("missing") is None


def test_invalid_status_and_unknown_id(make_store: Make) -> None:
    store = make_store()
    _, a = store.begin_turn("c", "q")
    with pytest.raises(ValueError, match=r"status must be one of \['cancelled', 'complete', 'error', "
                                         r"'pending'\], got 'done'"):
        store.finalize_message(a.id, content="", status="done")
    with pytest.raises(KeyError, match="nope"):
        store.finalize_message("nope", content="", status="complete")


def test_base_chat_store_api(make_store: Make) -> None:
    store = make_store()
    store.set_messages("k", [ChatMessage(role="user", content="a"), ChatMessage(role="assistant", content="b")])
    store.add_message("k", ChatMessage(role="user", content="c", additional_kwargs={"mine": 1}))
    store.add_message("other", ChatMessage(role="user", content="z"))
    assert [m.content for m in store.get_messages("k")] == ["a", "b", "c"]
    assert store.get_messages("k")[2].additional_kwargs == {"mine": 1}
    assert store.get_keys() == ["k", "other"]
    assert store.delete_message("k", 1).content == "b"
    assert store.delete_message("k", 5) is None
    assert store.delete_last_message("k").content == "c"
    assert [m.content for m in store.delete_messages("k")] == ["a"]
    assert store.delete_messages("k") is None
    assert store.get_keys() == ["other"]
    assert [m.content for m in asyncio.run(store.aget_messages("other"))] == ["z"]


def test_backs_llama_index_memory(make_store: Make) -> None:
    memory = ChatMemoryBuffer.from_defaults(chat_store=make_store(), chat_store_key="m", token_limit=1000)
    memory.put(ChatMessage(role=MessageRole.USER, content="hello"))
    memory.put(ChatMessage(role=MessageRole.ASSISTANT, content="hi"))
    again = ChatMemoryBuffer.from_defaults(chat_store=make_store(), chat_store_key="m", token_limit=1000)
    assert [(m.role, m.content) for m in again.get_all()] == [(MessageRole.USER, "hello"),
                                                              (MessageRole.ASSISTANT, "hi")]


def test_eight_threads_fifty_turns_nothing_lost(make_store: Make) -> None:
    store = make_store()
    errors = []

    def worker(t: int) -> None:
        try:
            for i in range(50):
                _, a = store.begin_turn(f"conv{t % 4}", f"q{t}-{i}")
                store.put_citations(a.id, [Citation(node_id=f"n{t}-{i}", source_index=0)])
                store.finalize_message(a.id, content=f"a{t}-{i}", status="complete")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    run_threads(worker, 8)
    assert errors == []
    reopened = make_store()
    assert sorted(reopened.get_keys()) == ["conv0", "conv1", "conv2", "conv3"]
    for c in range(4):
        msgs = reopened.get_conversation(f"conv{c}")
        assert len(msgs) == 200
        for t in (c, c + 4):  # per thread, turns stay in order and each answer follows its question
            mine = [m for m in msgs if m.content[1:].startswith(f"{t}-")]
            assert [m.content for m in mine] == [x for i in range(50) for x in (f"q{t}-{i}", f"a{t}-{i}")]
        answers = [m for m in msgs if m.role == "assistant"]
        assert all(m.status == "complete" for m in answers)
        assert [reopened.get_citations(a.id)[0].node_id for a in answers] == ["n" + a.content[1:] for a in answers]


def test_finish_turn_writes_all_or_nothing(make_store: Make) -> None:
    store = make_store()
    _, a = store.begin_turn("c", "q")
    store.finish_turn("c", a.id, content="ans", status="complete", error=None,
                      citations=[Citation(node_id="n", source_index=0)], record={"status": "complete"})
    again = make_store()
    assert (again.get_message(a.id).content, again.get_turn_record(a.id)) == ("ans", {"status": "complete"})
    assert [c.node_id for c in again.get_citations(a.id)] == ["n"]
    with pytest.raises(KeyError):  # unknown message: citations and record are rolled back too
        store.finish_turn("c", "ghost", content="x", status="complete", error=None,
                          citations=[Citation(node_id="n", source_index=0)], record={"x": 1})
    assert (store.get_citations("ghost"), store.get_turn_record("ghost")) == ([], None)


def test_a_summarising_memory_over_the_store_loses_nothing_and_keeps_the_owner(make_store: Make) -> None:
    """Core's ChatSummaryMemoryBuffer rewrites its list on every get() (delete_messages, then set_messages with a
    summary): the conversation's view changes, its messages, citations, turn records, feedback and owner stay."""
    from llama_index.core.memory import ChatSummaryMemoryBuffer

    from llama_index_convrag.testing import ScriptedLLM

    store = make_store()
    cid = store.create_conversation("alice", "served").id
    answers = []
    for i in range(3):
        _, a = store.begin_turn(cid, f"question {i} about the tower and its long history?")
        store.finish_turn(cid, a.id, content=f"answer {i} [1]", status="complete", error=None,
                          citations=[Citation(node_id=f"n{i}", source_index=0, marker=1)],
                          record={"answer": f"answer {i} [1]", "citations": [{"node_id": f"n{i}"}], "status": "ok"})
        store.put_feedback(a.id, "alice", "up", None)
        answers.append(a.id)
    before = store.get_conversation(cid)
    memory = ChatSummaryMemoryBuffer.from_defaults(chat_store=store, chat_store_key=cid, token_limit=12,
                                                   llm=ScriptedLLM.fixed("They asked about the tower."))
    memory.put(ChatMessage(role=MessageRole.USER, content="and the last one?"))
    view = memory.get()
    assert view[0].content == "They asked about the tower." and view[-1].content == "and the last one?"
    assert [m.content for m in store.get_messages(cid)] == [m.content for m in view]  # the memory's own list
    again = make_store()
    assert [m.id for m in again.get_conversation(cid)] == [m.id for m in before] + [again.get_conversation(cid)[-1].id]
    assert again.get_conversation(cid)[-1].content == "and the last one?"  # an added message joins the conversation
    for i, mid in enumerate(answers):
        assert [c.node_id for c in again.get_citations(mid)] == [f"n{i}"]
        assert again.get_turn_record(mid)["answer"] == f"answer {i} [1]"
        assert again.get_feedback(mid, "alice") is not None
    assert again.conversation_info(cid, owner="alice") is not None  # still alice's (not reset to 'local')
    assert [m.content for m in again.history(cid)][:2] == ["question 0 about the tower and its long history?",
                                                          "answer 0 [1]"]  # the engine's history is the conversation
    memory.reset()
    assert store.get_messages(cid) == [] and cid not in store.get_keys() and len(again.get_conversation(cid)) == 7


def test_a_turn_records_answer_and_citations_are_stored_once(make_store: Make) -> None:
    store = make_store()
    _, a = store.begin_turn("c", "q")
    record = {"status": "complete", "answer": "ans [1]", "citations": [{"node_id": "n", "source_index": 0}]}
    store.finish_turn("c", a.id, content="ans [1]", status="complete", error=None,
                      citations=[Citation(node_id="n", source_index=0, marker=1)], record=record)
    with store._tx(write=False) as run:  # the record's row holds neither: the message and the citation rows do
        [(raw,)] = run("SELECT record FROM convrag_turns WHERE message_id = :m", {"m": a.id})
    assert (json.loads(raw)["answer"], json.loads(raw)["citations"]) == (None, None)
    expected = {"status": "complete", "answer": "ans [1]",
                "citations": [Citation(node_id="n", source_index=0, marker=1).to_dict()]}
    assert store.get_turn_record(a.id) == expected and store.list_turn_records("c") == [expected]
