"""config.output_watch and the watched OpenAI client: each call's finish_reason, over real HTTP (plain and
streamed, sync and async), and the verdict on an answer."""

import openai
import pytest
from llama_index.core.base.llms.types import ChatMessage

from llama_index_convrag.config.llm import resolve_llm
from llama_index_convrag.config.output_watch import Finish, OutputWatch, finish_reason, report_finish, watching

MESSAGES = [ChatMessage(role="user", content="say it")]
LONG = " ".join(f"word{i}" for i in range(200))


def _llm(server, max_tokens):
    return resolve_llm(base_url=server.base_url, model="local", env={}, max_tokens=max_tokens, probe=False)


def test_problem_names_the_output_limit_an_empty_answer_and_a_stream_without_an_end():
    watch = OutputWatch()
    assert watch.problem("") is None  # no reported call: nothing to say
    report_finish(watch, "length", 64)
    assert watch.problem("cut") == ("the model stopped at its output limit (max_tokens=64): the answer is cut off; "
                                    "raise --max-tokens / CONVRAG_LLM_MAX_TOKENS or ask for a shorter answer")
    report_finish(watch, "stop", 64)
    assert watch.problem("fine") is None
    assert watch.earlier_truncations() == ["LLM call 1 of 2 stopped at its output limit (max_tokens=64); the answer "
                                           "was built on its cut-off text"]
    assert watch.problem("  ") == "the model returned an empty answer (finish_reason 'stop')"
    report_finish(watch, None, 64, streamed=True)
    assert "ended the stream without a finish reason" in watch.problem("partial")
    report_finish(None, "length", 1)  # no watch open: nothing recorded, nothing raised


def test_finish_reason_reads_objects_and_dicts():
    assert finish_reason({"choices": [{"finish_reason": "length"}]}) == "length"
    assert finish_reason({"choices": []}) is None
    assert finish_reason(None) is None


def test_a_reply_cut_at_max_tokens_is_reported_as_length(openai_server):
    openai_server.chat_responder = lambda body: {"content": LONG}
    with watching(OutputWatch()) as watch:
        reply = _llm(openai_server, 8).chat(MESSAGES)
    assert openai_server.requests[0].body["max_tokens"] == 8
    assert watch.calls == [Finish("length", 8)]
    assert reply.message.content and reply.message.content != LONG
    with watching(OutputWatch()) as watch:
        _llm(openai_server, 1000).chat(MESSAGES)
    assert watch.calls == [Finish("stop", 1000)]


def test_a_stream_reports_to_the_watch_open_when_it_started(openai_server):
    openai_server.chat_responder = lambda body: {"content": LONG}
    watch = OutputWatch()
    with watching(watch):
        gen = _llm(openai_server, 8).stream_chat(MESSAGES)
    assert watch.calls == []  # nothing read yet
    "".join(r.delta or "" for r in gen)  # read outside the block, as a streamed answer is
    assert watch.calls == [Finish("length", 8, streamed=True)]


async def test_async_calls_report_too(openai_server):
    openai_server.chat_responder = lambda body: {"content": LONG}
    llm = _llm(openai_server, 8)
    with watching(OutputWatch()) as watch:
        await llm.achat(MESSAGES)
        gen = await llm.astream_chat(MESSAGES)
        async for _ in gen:
            pass
    assert watch.calls == [Finish("length", 8), Finish("length", 8, streamed=True)]


def test_no_watch_open_means_nothing_is_recorded(openai_server):
    openai_server.chat_responder = lambda body: {"content": LONG}
    _llm(openai_server, 8).chat(MESSAGES)  # no error, nowhere to report


def test_the_window_check_answers_like_llama_cpp_python(openai_server):
    openai_server.context_window = 300
    with pytest.raises(openai.BadRequestError, match=r"maximum context length is 300 tokens. However, you requested "
                                                     r"305 tokens \(6 in the messages, 299 in the completion\)"):
        _llm(openai_server, 299).chat(MESSAGES)
    assert openai_server.requests[-1].body["max_tokens"] == 299
