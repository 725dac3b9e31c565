"""Structured answer filtering over HTTP: real tool calls through the local OpenAI-compatible server."""

import json

from llama_index_convrag.config import resolve_llm
from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.synthesizers.structured import StructuredRefineResponse, build_program, run_program
from llama_index_convrag.testing import ScriptedLLM
from llama_index.core.prompts import PromptTemplate

from .conftest import make_nodes, qa


def _responder(replies):
    """Answer each tool-offering request by the chunk its prompt carries."""

    def respond(body):
        assert body["tools"][0]["function"]["name"] == "StructuredRefineResponse"
        prompt = body["messages"][-1]["content"]
        arguments = next(v for k, v in replies.items() if f"\n{k}\n" in prompt)
        return {"tool_calls": [{"name": "StructuredRefineResponse", "arguments": arguments}]}

    return respond


def _args(satisfied, answer):
    return json.dumps({"query_satisfied": satisfied, "answer": answer})


def test_refine_filters_through_real_tool_calls(openai_server):
    openai_server.chat_responder = _responder(
        {"c1": _args(False, "no idea"), "c2": "{not json", "c3": _args(True, "Paris"), "c4": _args(True, "Lyon")}
    )
    llm = resolve_llm(base_url=openai_server.base_url, model="x", env={})
    # refine mode keeps one chunk per call, so the early stop after c3 saves the c4 call
    synth = get_response_synthesizer(
        llm=llm, response_mode="refine", structured_answer_filtering=True, early_stop=True
    )
    response = synth.synthesize("q?", make_nodes(["c1", "c2", "c3", "c4"]))
    assert openai_server.paths() == ["/v1/chat/completions"] * 3
    assert [r.body["messages"][-1]["content"] for r in openai_server.requests] == [qa("c1"), qa("c2"), qa("c3")]
    assert response.response == "Paris"
    assert response.metadata["llm_calls"] == 3 and response.metadata["llm_calls_saved"] == 1
    assert len(response.metadata["skipped_chunks"]) == 1 and response.metadata["skipped_chunks"][0]["call_index"] == 1
    # the tool is named, so servers that constrain output by the tool's schema (llama.cpp) return a tool call
    assert [r.body["tool_choice"] for r in openai_server.requests] == [
        {"type": "function", "function": {"name": "StructuredRefineResponse"}}] * 3


async def test_accumulate_filters_through_real_tool_calls_async(openai_server):
    replies = {"c1": _args(True, "one"), "c2": _args(False, "x"), "c3": _args(True, "three")}
    openai_server.chat_responder = _responder(replies)
    llm = resolve_llm(base_url=openai_server.base_url, model="x", env={})
    synth = get_response_synthesizer(llm=llm, response_mode="accumulate", structured_answer_filtering=True)
    response = await synth.asynthesize("q?", make_nodes(["c1", "c2", "c3"]))
    assert len(openai_server.requests) == 3
    assert response.response == "Response 1: one\n---------------------\nResponse 2: three"


def test_program_choice_follows_function_calling_metadata():
    prompt = PromptTemplate("{context_str}|{query_str}")
    tool_llm = ScriptedLLM.fixed(_args(True, "t"))
    text_llm = ScriptedLLM.fixed("Sure: " + _args(True, "j") + " done", function_calling=False)
    assert run_program(build_program(prompt, tool_llm), {"context_str": "c", "query_str": "q"}) == (
        StructuredRefineResponse(query_satisfied=True, answer="t"), None
    )
    assert tool_llm.calls[0].tools == ["StructuredRefineResponse"]
    reply, error = run_program(build_program(prompt.partial_format(), text_llm), {"context_str": "c", "query_str": "q"})
    assert reply == StructuredRefineResponse(query_satisfied=True, answer="j") and error is None
    assert text_llm.calls[0].kind == "complete" and text_llm.prompts[0].startswith("c|q")
    bad, error = run_program(build_program(prompt.partial_format(), ScriptedLLM.fixed("nope", function_calling=False)),
                             {"context_str": "c", "query_str": "q"})
    assert bad is None and error.startswith("ValueError")
