"""Placeholder lifecycle: complete / error / cancelled, sync and async, through the engine and the bare helpers."""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional

import pytest

from llama_index_convrag.chat import ConvRAGChatEngine
from llama_index_convrag.chat.streaming import Finalizer, astream_lifecycle, stream_lifecycle
from llama_index_convrag.testing import ScriptedFailure, ScriptedLLM

ANSWER = "Inception was released in 2010 [1]."  # its first words restate the question: a stream holds them


def make(retriever: Any, store: Any, **llm_kw: Any) -> ConvRAGChatEngine:
    return ConvRAGChatEngine.from_defaults(retriever, ScriptedLLM.fixed(ANSWER, **llm_kw), conversation_store=store,
                                           conversation_id="conv")


def placeholder(store: Any, mid: str) -> Any:
    return store.get_message(mid)


# --- bare helpers -----------------------------------------------------------------------------------------------
def _recorder() -> "tuple[Finalizer, List[Any]]":
    calls: List[Any] = []
    return Finalizer(lambda s, t, e: calls.append((s, t, None if e is None else str(e)))), calls


def _failing(n: int) -> Any:
    for i in range(n):
        yield f"d{i} "
    raise RuntimeError("boom")


@pytest.mark.parametrize("source, consume, expected", [
    (lambda: iter(["a ", "", "b"]), lambda g: list(g), ("complete", "a b", None)),
    (lambda: _failing(2), lambda g: pytest.raises(RuntimeError, list, g), ("error", "d0 d1 ", "boom")),
    (lambda: iter(["a ", "b ", "c"]), lambda g: (next(g), g.close()), ("cancelled", "a ", None)),
])
def test_sync_lifecycle(source: Any, consume: Any, expected: Any) -> None:
    fin, calls = _recorder()
    consume(stream_lifecycle(source(), fin))
    assert calls == [expected]
    fin("complete", "again")  # idempotent
    assert calls == [expected]


def test_async_lifecycle_complete_error_cancel() -> None:
    async def agen(items: List[str], fail: Optional[int] = None) -> Any:
        for i, x in enumerate(items):
            if fail is not None and i == fail:
                raise RuntimeError("boom")
            yield x

    async def run() -> List[Any]:
        out = []
        fin, calls = _recorder()
        _ = [d async for d in astream_lifecycle(agen(["a ", "b"]), fin)]
        out.append(calls[0])
        fin, calls = _recorder()
        with pytest.raises(RuntimeError):
            _ = [d async for d in astream_lifecycle(agen(["a ", "b"], fail=1), fin)]
        out.append(calls[0])
        fin, calls = _recorder()
        g = astream_lifecycle(agen(["a ", "b"]), fin)
        await g.__anext__()
        await g.aclose()
        out.append(calls[0])
        return out

    assert asyncio.run(run()) == [("complete", "a b", None), ("error", "a ", "boom"), ("cancelled", "a ", None)]


# --- engine, sync ------------------------------------------------------------------------------------------------
def test_sync_complete_placeholder_before_first_token(retriever: Any, store: Any) -> None:
    resp = make(retriever, store).stream_chat("Who directed Inception?")
    before = placeholder(store, resp.message_id)
    assert (before.role, before.status, before.content) == ("assistant", "pending", "")
    assert store.get_message(resp.user_message_id).content == "Who directed Inception?"
    assert "".join(resp.response_gen) == ANSWER
    after = placeholder(store, resp.message_id)
    assert (after.status, after.content, resp.status, str(resp)) == ("complete", ANSWER, "complete", ANSWER)
    assert [c.node_id for c in store.get_citations(resp.message_id)] == [n.node.node_id for n in resp.source_nodes]
    assert store.get_turn_record(resp.message_id)["status"] == "complete"


def test_sync_error_keeps_partial_text(retriever: Any, store: Any) -> None:
    resp = make(retriever, store, fail_after_deltas=2).stream_chat("Who directed Inception?")
    got: List[str] = []
    with pytest.raises(ScriptedFailure):
        for d in resp.response_gen:
            got.append(d)
    msg = placeholder(store, resp.message_id)
    assert (msg.status, msg.content, msg.error) == ("error", "Inception was ",
                                                    "ScriptedFailure: scripted failure after 2 deltas")
    assert "".join(got) == "Inception was "
    assert store.get_message(resp.user_message_id).content == "Who directed Inception?"


def test_sync_cancel_by_break(retriever: Any, store: Any) -> None:
    resp = make(retriever, store).stream_chat("Who directed Inception?")
    for _ in resp.response_gen:
        break
    msg = placeholder(store, resp.message_id)
    assert (msg.status, msg.content) == ("cancelled", "Inception was released ")
    assert store.get_turn_record(resp.message_id)["status"] == "cancelled"


def test_sync_cancel_by_close_without_reading(retriever: Any, store: Any) -> None:
    resp = make(retriever, store).stream_chat("Who directed Inception?")
    resp.close()
    assert (placeholder(store, resp.message_id).status, resp.status) == ("cancelled", "cancelled")


def test_stream_no_docs_fixed_reply(store: Any) -> None:
    from tests.chat.conftest import EmptyRetriever

    llm = ScriptedLLM.fixed("never")
    engine = ConvRAGChatEngine.from_defaults(EmptyRetriever(), llm, conversation_store=store,
                                             response_if_no_docs_found="Nothing found.")
    resp = engine.stream_chat("anything?")
    assert ("".join(resp.response_gen), llm.call_count) == ("Nothing found.", 0)
    assert placeholder(store, resp.message_id).status == "complete"
    assert store.get_turn_record(resp.message_id)["status"] == "no_docs"


# --- engine, async -----------------------------------------------------------------------------------------------
async def _settle(store: Any, mid: str) -> str:
    for _ in range(200):  # let the event loop run the async generator finaliser
        status = placeholder(store, mid).status
        if status != "pending":
            return status
        await asyncio.sleep(0.005)
    return "pending"


def test_async_complete(retriever: Any, store: Any) -> None:
    async def run() -> Any:
        resp = await make(retriever, store).astream_chat("Who directed Inception?")
        assert placeholder(store, resp.message_id).status == "pending"
        return resp, "".join([d async for d in resp.async_response_gen()])

    resp, text = asyncio.run(run())
    assert text == ANSWER
    msg = placeholder(store, resp.message_id)
    assert (msg.status, msg.content) == ("complete", ANSWER)
    assert len(store.get_citations(resp.message_id)) == 3


def test_async_error(retriever: Any, store: Any) -> None:
    async def run() -> Any:
        resp = await make(retriever, store, fail_after_deltas=3).astream_chat("Who directed Inception?")
        with pytest.raises(ScriptedFailure):
            async for _ in resp.async_response_gen():
                pass
        return resp

    resp = asyncio.run(run())
    msg = placeholder(store, resp.message_id)
    assert (msg.status, msg.content) == ("error", "Inception was released ")


def test_async_cancel_by_break_and_by_aclose(retriever: Any, store: Any) -> None:
    async def run() -> Any:
        engine = make(retriever, store)
        first = await engine.astream_chat("Who directed Inception?")
        async for _ in first.async_response_gen():
            break
        second = await engine.astream_chat("Who directed Inception?")
        await second.aclose()
        return first, await _settle(store, first.message_id), second

    first, status, second = asyncio.run(run())
    assert (status, placeholder(store, first.message_id).content) == ("cancelled", "Inception was released ")
    assert placeholder(store, second.message_id).status == "cancelled"
    users = [m.content for m in store.get_conversation("conv") if m.role == "user"]
    assert users == ["Who directed Inception?", "Who directed Inception?"]


def test_wrong_generator_kind_is_explained(retriever: Any, store: Any) -> None:
    resp = make(retriever, store).stream_chat("Who directed Inception?")
    with pytest.raises(ValueError, match="produced by stream_chat"):
        asyncio.run(resp.async_response_gen().__anext__())
    resp.close()


def test_dropped_unread_response_is_cancelled(retriever: Any, store: Any) -> None:
    import gc

    resp = make(retriever, store).stream_chat("Who directed Inception?")
    mid = resp.message_id
    del resp
    gc.collect()
    assert placeholder(store, mid).status == "cancelled"


def test_failure_before_first_token_finalises_error(store: Any) -> None:
    from tests.chat.conftest import FixedRetriever

    class Broken(FixedRetriever):
        def _retrieve(self, query_bundle: Any) -> Any:
            raise ConnectionError("milvus down")

    engine = ConvRAGChatEngine.from_defaults(Broken([]), ScriptedLLM.fixed("x"), conversation_store=store,
                                             conversation_id="conv")
    with pytest.raises(ConnectionError):
        engine.stream_chat("Who directed Inception?")
    with pytest.raises(ConnectionError):
        asyncio.run(engine.astream_chat("Who directed Inception?"))
    msgs = store.get_conversation("conv")
    assert [(m.role, m.status) for m in msgs] == [("user", "complete"), ("assistant", "error")] * 2
    assert msgs[1].error == "ConnectionError: milvus down"


def test_next_turn_sees_the_partial_text_of_a_stopped_answer(retriever: Any, store: Any) -> None:
    """The user saw 'Inception was released ' before stopping the stream: the follow-up is rewritten (and answered) with it."""
    condense = ScriptedLLM.fixed("When was Inception released?")
    engine = ConvRAGChatEngine.from_defaults(retriever, ScriptedLLM.fixed(ANSWER), condense_llm=condense,
                                             conversation_store=store, conversation_id="conv",
                                             rewrite_trigger=False)
    first = engine.stream_chat("Who directed Inception?")
    for _ in first.response_gen:
        break
    assert (first.status, first.is_done, first.response) == ("cancelled", True, "Inception was released")
    assert [(m.role, m.content) for m in engine.chat_history] == [
        ("user", "Who directed Inception?"), ("assistant", "Inception was released ")]
    engine.chat("When was it released?")
    assert "user: Who directed Inception?\nassistant: Inception was released \n" in condense.prompts[0]


def test_a_stream_stopped_before_any_text_leaves_no_answer_in_history(retriever: Any, store: Any) -> None:
    engine = make(retriever, store)
    engine.stream_chat("Who directed Inception?").close()
    assert [(m.role, m.status) for m in store.get_conversation("conv")] == [("user", "complete"),
                                                                            ("assistant", "cancelled")]
    assert [m.role for m in engine.chat_history] == ["user"]


async def test_async_task_completes_when_the_stopped_turn_is_stored(retriever: Any, store: Any) -> None:
    engine = make(retriever, store)
    resp = await engine.astream_chat("Who directed Inception?")
    async for _ in resp.async_response_gen():
        break
    assert await resp.awrite_response_to_history_task == "cancelled"
    assert [(m.role, m.content) for m in engine.chat_history] == [
        ("user", "Who directed Inception?"), ("assistant", "Inception was released ")]


def test_dropped_response_is_cancelled_without_waiting_for_the_garbage_collector(retriever: Any, store: Any) -> None:
    import gc

    gc.disable()
    try:
        resp = make(retriever, store).stream_chat("Who directed Inception?")
        mid = resp.message_id
        del resp
        assert placeholder(store, mid).status == "cancelled"
    finally:
        gc.enable()
