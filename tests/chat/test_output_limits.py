"""The chat engine and a model's output limit, through the real local OpenAI-compatible server: an answer cut at
``max_tokens`` is stored as ``error`` with its text on all four turn paths; an empty one is replaced by the answer
fallback (chat/fallback.py) and stays ``complete``; an intermediate call cut at it
is noted in the record's ``warnings``; a reranker that failed is named there too."""

from typing import Any, Dict, List

import pytest

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine, RewriteOptions
from llama_index_convrag.config.llm import resolve_llm
from llama_index_convrag.postprocessors import ModelRerank
from llama_index_convrag.postprocessors.scorers import LLMScorer

LONG = " ".join(f"word{i}" for i in range(300))
CUT = "the model stopped at its output limit (max_tokens=16)"


def _engine(server: Any, retriever: Any, store: Any, **kw: Any) -> ConvRAGChatEngine:
    llm = resolve_llm(base_url=server.base_url, model="local", env={}, max_tokens=16, probe=False)
    return ConvRAGChatEngine.from_defaults(retriever, llm, conversation_store=store,
                                           rewrite=RewriteOptions(strategy="none"),
                                           answer=AnswerOptions(**{"citations": False, **kw}))


def _answer(store: Any, engine: ConvRAGChatEngine) -> Any:
    return [m for m in store.get_conversation(engine.conversation_id) if m.role == "assistant"][-1]


async def _run(engine: ConvRAGChatEngine, path: str) -> Any:
    if path == "chat":
        return engine.chat("Who directed Inception?").metadata["turn"]
    if path == "achat":
        return (await engine.achat("Who directed Inception?")).metadata["turn"]
    if path == "stream_chat":
        response = engine.stream_chat("Who directed Inception?")
        "".join(response.response_gen)
        return response.metadata["turn"]
    response = await engine.astream_chat("Who directed Inception?")
    async for _ in response.async_response_gen():
        pass
    return response.metadata["turn"]


@pytest.mark.parametrize("path", ["chat", "achat", "stream_chat", "astream_chat"])
async def test_an_answer_cut_at_max_tokens_is_stored_as_error_with_its_text(openai_server, retriever, store, path):
    openai_server.chat_responder = lambda body: {"content": LONG}
    engine = _engine(openai_server, retriever, store)
    record = await _run(engine, path)
    assert record.status == "error" and record.error.startswith(f"IncompleteAnswer: {CUT}")
    message = _answer(store, engine)
    assert (message.status, message.content) == ("error", record.answer)
    assert record.answer.startswith("word0 word1") and len(record.answer) < len(LONG)
    assert all(r.body["max_tokens"] == 16 for r in openai_server.requests)


@pytest.mark.parametrize("path", ["chat", "astream_chat"])
async def test_an_empty_reply_over_passages_shows_the_extractive_answer_as_complete(openai_server, retriever, store,
                                                                                    path):
    # the model's empty reply and its retry without citations are both empty: the extractive answer is shown, and
    # the record says so; the watched call's emptiness does not turn the shown answer into an error
    openai_server.chat_responder = lambda body: {"content": ""}
    engine = _engine(openai_server, retriever, store)
    record = await _run(engine, path)
    assert (record.status, record.error, record.answer_source) == ("complete", None, "extractive_fallback")
    assert record.answer.strip() and "[" not in record.answer  # the engine cites nothing by default: no marker
    assert _answer(store, engine).status == "complete"


async def test_a_complete_answer_stays_complete(openai_server, retriever, store):
    openai_server.chat_responder = lambda body: {"content": "Christopher Nolan [1]."}
    engine = _engine(openai_server, retriever, store)
    record = await _run(engine, "stream_chat")
    assert (record.status, record.error, record.warnings) == ("complete", None, [])


def test_an_intermediate_refine_step_cut_at_max_tokens_is_a_warning(openai_server, retriever, store):
    replies: List[str] = [LONG, "Christopher Nolan directed it [1]."]
    openai_server.chat_responder = lambda body: {"content": replies.pop(0) if replies else "unused"}
    engine = _engine(openai_server, retriever, store, response_mode="refine")
    record = engine.chat("Who directed Inception?").metadata["turn"]
    assert record.status == "complete"
    calls = len(openai_server.requests)
    assert calls >= 2
    assert record.warnings[0] == (f"LLM call 1 of {calls} stopped at its output limit (max_tokens=16); the answer "
                                  f"was built on its cut-off text")


def test_a_failed_reranker_is_named_in_the_turn_record(openai_server, retriever, store):
    def responder(body: Dict[str, Any]) -> Dict[str, Any]:
        return {"content": "Christopher Nolan [1]."}

    openai_server.chat_responder = responder
    openai_server.fail_next(400)  # the rerank call comes first
    llm = resolve_llm(base_url=openai_server.base_url, model="local", env={}, max_tokens=16, probe=False)
    engine = ConvRAGChatEngine.from_defaults(retriever, llm, conversation_store=store,
                                             rewrite=RewriteOptions(strategy="none"),
                                             node_postprocessors=[ModelRerank(LLMScorer(llm))])
    record = engine.chat("Who directed Inception?").metadata["turn"]
    assert record.status == "complete"
    assert len(record.warnings) == 1
    assert record.warnings[0].startswith("rerank failed, the retrieval order was kept: BadRequestError: Error code: "
                                         "400")
    stored = store.get_turn_record(record.assistant_message_id)
    assert stored["warnings"] == record.warnings


@pytest.mark.parametrize("path", ["chat", "achat", "stream_chat", "astream_chat"])
async def test_a_retry_cut_at_max_tokens_is_stored_as_error_too(openai_server, retriever, store, path):
    # the first reply is only a marker, the retry without citations is cut at the output limit: the retry's call is
    # watched as the first one is, so the shown (retried) answer is not stored as complete
    replies = iter(["[1]", LONG])
    openai_server.chat_responder = lambda body: {"content": next(replies)}
    engine = _engine(openai_server, retriever, store, citations=True)
    record = await _run(engine, path)
    assert record.answer_source == "llm_retry_without_citations"
    assert record.status == "error" and record.error.startswith(f"IncompleteAnswer: {CUT}")
    assert record.answer.startswith("word0 word1") and _answer(store, engine).status == "error"
