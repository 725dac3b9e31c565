"""Accumulate: one call per chunk, answers joined; structured filtering (core has none here); use_async."""

import json

from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

from .conftest import make_nodes, qa

SEP = "\n---------------------\n"


def test_one_call_per_chunk_and_joined_answers(three_nodes):
    llm = ScriptedLLM.cycle(["a", "b", "c"])
    response = get_response_synthesizer(llm=llm, response_mode="accumulate").synthesize("q?", three_nodes)
    assert llm.prompts == [qa("alpha fact"), qa("beta fact"), qa("gamma fact")]
    assert response.response == SEP.join(["Response 1: a", "Response 2: b", "Response 3: c"])
    assert response.metadata["llm_calls"] == 3


def test_use_async_and_async_give_the_same_prompts(three_nodes):
    llm = ScriptedLLM.from_fn(lambda p: p.split("\n")[2])
    response = get_response_synthesizer(llm=llm, response_mode="accumulate", use_async=True).synthesize(
        "q?", three_nodes
    )
    assert sorted(llm.prompts) == sorted([qa("alpha fact"), qa("beta fact"), qa("gamma fact")])
    assert response.response == SEP.join(["Response 1: alpha fact", "Response 2: beta fact", "Response 3: gamma fact"])


async def test_async_accumulate(three_nodes):
    llm = ScriptedLLM.from_fn(lambda p: p.split("\n")[2])
    response = await get_response_synthesizer(llm=llm, response_mode="accumulate").asynthesize("q?", three_nodes)
    assert response.response.endswith("Response 3: gamma fact") and response.metadata["llm_calls"] == 3


def test_structured_filtering_keeps_satisfied_answers_and_reports_bad_replies():
    def reply(prompt: str) -> str:
        if "\nc2\n" in prompt:
            return "{broken"
        return json.dumps({"query_satisfied": "\nc3\n" in prompt, "answer": prompt.split("\n")[2].upper()})

    llm = ScriptedLLM.from_fn(reply)
    synth = get_response_synthesizer(llm=llm, response_mode="accumulate", structured_answer_filtering=True)
    response = synth.synthesize("q?", make_nodes(["c1", "c2", "c3"]))
    assert llm.call_count == 3 and all(c.tools == ["StructuredRefineResponse"] for c in llm.calls)
    assert response.response == "Response 1: C3"
    assert [s["call_index"] for s in response.metadata["skipped_chunks"]] == [1]


async def test_separator_per_call_as_core():
    """Issue 11 bug 3: get_response(..., separator=" | ") ignored the separator (it was taken for a template
    variable and reported unused)."""
    llm = ScriptedLLM.cycle(["a", "b"])
    synth = get_response_synthesizer(llm=llm, response_mode="accumulate")
    assert synth.get_response("q?", ["x", "y"], separator=" | ") == "Response 1: a | Response 2: b"
    response = await synth.asynthesize("q?", make_nodes(["x", "y"]), separator=" / ")
    assert response.response == "Response 1: a / Response 2: b"
    assert response.metadata["unused_variables"] == []
