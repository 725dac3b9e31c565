"""Compact accumulate: core's windows; structured filtering through a text-completion JSON program."""

import json

from llama_index.core.response_synthesizers.compact_and_accumulate import CompactAndAccumulate as CoreCompactAccumulate

from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

from .conftest import make_nodes, qa, tokens

TEXTS = [" ".join(f"fact{i}x{j}" for j in range(30)) for i in range(6)]


def test_small_input_is_one_window(three_nodes):
    llm = ScriptedLLM.fixed("a")
    response = get_response_synthesizer(llm=llm, response_mode="compact_accumulate").synthesize("q?", three_nodes)
    assert llm.prompts == [qa("alpha fact\n\nbeta fact\n\ngamma fact")]
    assert response.response == "Response 1: a"


def test_tight_window_one_call_per_packed_window_as_core():
    llm = ScriptedLLM.fixed("a", context_window=600, num_output=64)
    response = get_response_synthesizer(llm=llm, response_mode="compact_accumulate").synthesize(
        "q?", make_nodes(TEXTS)
    )
    core_llm = ScriptedLLM.fixed("a", context_window=600, num_output=64)
    CoreCompactAccumulate(llm=core_llm).synthesize("q?", make_nodes(TEXTS))
    assert llm.prompts == core_llm.prompts and llm.call_count == 2
    assert all(tokens(p) <= 600 - 64 for p in llm.prompts)
    assert response.response.count("Response ") == 2


def test_structured_filtering_with_a_text_completion_program():
    def reply(prompt: str) -> str:
        return json.dumps({"query_satisfied": True, "answer": "ok"})

    llm = ScriptedLLM.from_fn(reply, function_calling=False)
    synth = get_response_synthesizer(llm=llm, response_mode="compact_accumulate", structured_answer_filtering=True)
    response = synth.synthesize("q?", make_nodes(["c1", "c2"]))
    assert [c.kind for c in llm.calls] == ["complete"] and llm.calls[0].tools == []
    prompt = llm.prompts[0]
    assert prompt.startswith(qa("c1\n\nc2"))
    assert '"query_satisfied"' in prompt and "JSON" in prompt  # the schema instructions of the JSON program
    assert response.response == "Response 1: ok"
    assert response.metadata["prompt_tokens"] == tokens(prompt)
