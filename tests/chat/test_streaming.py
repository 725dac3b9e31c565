"""Placeholder lifecycle: complete / error / cancelled, sync and async, through the engine and the bare pipeline.
Nothing is committed from a finaliser: a response dropped unclosed stays ``pending`` until recovery."""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional

import pytest

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine, RewriteOptions
from llama_index_convrag.chat.stream_pipeline import TurnStream
from llama_index_convrag.synthesizers.stream_hold import StreamHold
from llama_index_convrag.testing import ScriptedFailure, ScriptedLLM

ANSWER = "Inception was released in 2010 [1]."  # its first words restate the question: a stream holds them


def make(retriever: Any, store: Any, **llm_kw: Any) -> ConvRAGChatEngine:
    """Uncited answers: the model's deltas as it writes them (the aligned hold is tested in test_aligned_answers)."""
    return ConvRAGChatEngine.from_defaults(retriever, ScriptedLLM.fixed(ANSWER, **llm_kw), conversation_store=store,
                                           conversation_id="conv", answer=AnswerOptions(citations=False))


def placeholder(store: Any, mid: str) -> Any:
    return store.get_message(mid)


# --- the bare pipeline -----------------------------------------------------------------------------------------
def _pipeline(deltas: Any, is_async: bool = False) -> "tuple[TurnStream, List[Any]]":
    calls: List[Any] = []

    def commit(status: str, text: str, error: Optional[BaseException]) -> None:
        calls.append((status, text, None if error is None else str(error)))

    async def acommit(status: str, text: str, error: Optional[BaseException]) -> None:
        commit(status, text, error)

    kind = {"adeltas": deltas} if is_async else {"deltas": deltas}
    return TurnStream(StreamHold(), commit=commit, acommit=acommit, **kind), calls


def _failing(n: int) -> Any:
    for i in range(n):
        yield f"d{i} "
    raise RuntimeError("boom")


@pytest.mark.parametrize("source, consume, expected", [
    (lambda: iter(["a ", "", "b"]), lambda s: list(s.iterate()), ("complete", "a b", None)),
    (lambda: _failing(2), lambda s: pytest.raises(RuntimeError, list, s.iterate()), ("error", "d0 d1 ", "boom")),
    (lambda: iter(["a ", "b ", "c"]), lambda s: (next(s.iterate()), s.iterate().close()), ("cancelled", "a ", None)),
    (lambda: iter(["a ", "b ", "c"]), lambda s: (next(s.iterate()), s.close()), ("cancelled", "a ", None)),
])
def test_sync_pipeline_commits_once(source: Any, consume: Any, expected: Any) -> None:
    stream, calls = _pipeline(source())
    consume(stream)
    assert calls == [expected] and stream.status == expected[0]
    stream.commit("complete")  # once
    stream.close()
    assert calls == [expected]


def test_async_pipeline_complete_error_cancel() -> None:
    async def agen(items: List[str], fail: Optional[int] = None) -> Any:
        for i, x in enumerate(items):
            if fail is not None and i == fail:
                raise RuntimeError("boom")
            yield x

    async def run() -> List[Any]:
        out = []
        stream, calls = _pipeline(agen(["a ", "b"]), is_async=True)
        _ = [d async for d in stream.aiterate()]
        out.append(calls[0])
        stream, calls = _pipeline(agen(["a ", "b"], fail=1), is_async=True)
        with pytest.raises(RuntimeError):
            _ = [d async for d in stream.aiterate()]
        out.append(calls[0])
        stream, calls = _pipeline(agen(["a ", "b"]), is_async=True)
        await stream.aiterate().__anext__()
        await stream.aclose()
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
                                             answer=AnswerOptions(no_docs_reply="Nothing found."))
    resp = engine.stream_chat("anything?")
    assert ("".join(resp.response_gen), llm.call_count) == ("Nothing found.", 0)
    assert placeholder(store, resp.message_id).status == "complete"
    assert store.get_turn_record(resp.message_id)["status"] == "no_docs"


# --- engine, async -----------------------------------------------------------------------------------------------
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
        await first.aclose()  # an async generator is closed explicitly (never by its finaliser)
        second = await engine.astream_chat("Who directed Inception?")
        await second.aclose()
        return first, placeholder(store, first.message_id).status, second

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


def test_a_dropped_unread_response_stays_pending_until_recovery(retriever: Any, store: Any) -> None:
    """No finaliser writes to the store: the placeholder of a stream dropped unclosed is finalised by recovery."""
    import gc

    from llama_index_convrag.storage.conversation.recovery import ABANDONED_ERROR, mark_abandoned, pending_messages

    resp = make(retriever, store).stream_chat("Who directed Inception?")
    mid = resp.message_id
    del resp
    gc.collect()
    assert placeholder(store, mid).status == "pending"
    assert [m.id for m in pending_messages(store)] == [mid]
    mark_abandoned(store, pending_messages(store))
    assert (placeholder(store, mid).status, placeholder(store, mid).error) == ("error", ABANDONED_ERROR)


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
    engine = ConvRAGChatEngine.from_defaults(retriever, ScriptedLLM.fixed(ANSWER), conversation_store=store,
                                             conversation_id="conv", rewrite=RewriteOptions(llm=condense, trigger=None),
                                             answer=AnswerOptions(citations=False))
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
    await resp.aclose()
    assert await resp.awrite_response_to_history_task == "cancelled"
    assert [(m.role, m.content) for m in engine.chat_history] == [
        ("user", "Who directed Inception?"), ("assistant", "Inception was released ")]


async def test_a_reader_task_cancelled_while_the_answer_is_awaited_commits_cancelled() -> None:
    started = asyncio.Event()

    async def slow() -> Any:
        yield "a "
        started.set()
        await asyncio.sleep(10)  # the LLM's next token: the reader's task is cancelled here
        yield "b"

    stream, calls = _pipeline(slow(), is_async=True)
    task = asyncio.create_task(_drain(stream.aiterate()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (stream.status, calls) == ("cancelled", [("cancelled", "a ", None)])


async def _drain(agen: Any) -> List[str]:
    return [d async for d in agen]
