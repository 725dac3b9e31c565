import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.prompts import PromptTemplate

from tests.fakes import ScriptedFailure, ScriptedLLM, split_deltas


def test_modes():
    assert ScriptedLLM.fixed("x").complete("p").text == "x"
    cyc = ScriptedLLM.cycle(["a", "b"])
    assert [cyc.complete(str(i)).text for i in range(3)] == ["a", "b", "a"]
    assert ScriptedLLM.from_fn(lambda p: p.upper()).complete("hi").text == "HI"
    assert ScriptedLLM.echo().complete("same").text == "same"


def test_bad_mode_names_choices():
    with pytest.raises(ValueError, match=r"mode must be one of \['fixed', 'cycle', 'fn', 'echo'\], got 'loop'"):
        ScriptedLLM(mode="loop")


def test_records_prompts_and_kinds():
    llm = ScriptedLLM.echo()
    llm.complete("one")
    llm.chat([ChatMessage(role="user", content="two")])
    assert llm.prompts[0] == "one"
    assert "two" in llm.prompts[1]
    assert [c.kind for c in llm.calls] == ["complete", "chat"]


def test_stream_deltas_rebuild_text():
    assert "".join(split_deltas("a  b\nc ")) == "a  b\nc "
    llm = ScriptedLLM.fixed("one two three")
    assert [r.delta for r in llm.stream_complete("p")] == ["one ", "two ", "three"]


def test_failures_on_call_and_mid_stream():
    llm = ScriptedLLM.fixed("x y z", fail_on_call=1)
    llm.complete("ok")
    with pytest.raises(ScriptedFailure):
        llm.complete("boom")
    streaming = ScriptedLLM.fixed("x y z", fail_after_deltas=2)
    got = []
    with pytest.raises(ScriptedFailure):
        for r in streaming.stream_complete("p"):
            got.append(r.delta)
    assert got == ["x ", "y "]


class Out(BaseModel):
    value: int


def test_function_calling_structured_predict():
    llm = ScriptedLLM.fixed('{"value": 7}')
    assert llm.structured_predict(Out, PromptTemplate("give {n}"), n=1) == Out(value=7)
    assert llm.calls[-1].tools == ["Out"]


async def test_async_twins():
    llm = ScriptedLLM.fixed("a b")
    assert (await llm.acomplete("p")).text == "a b"
    gen = await llm.astream_chat([ChatMessage(role="user", content="x")])
    assert [r.delta async for r in gen] == ["a ", "b"]
