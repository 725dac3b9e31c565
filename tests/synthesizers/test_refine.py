"""Refine: exact prompts and call counts, chunk splitting, early stop, structured filtering (scripted tool calls)."""

import json

import pytest
from llama_index.core.response_synthesizers import Refine as CoreRefine

from llama_index_convrag.synthesizers import Refine, get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

from .conftest import make_nodes, qa, refine, tokens


def test_one_call_per_chunk_with_exact_prompts(three_nodes):
    llm = ScriptedLLM.cycle(["A1", "A2", "A3"])
    response = get_response_synthesizer(llm=llm, response_mode="refine").synthesize("q?", three_nodes)
    assert llm.prompts == [qa("alpha fact"), refine("A1", "beta fact"), refine("A2", "gamma fact")]
    assert response.response == "A3"
    assert response.metadata["llm_calls"] == 3
    assert response.metadata["prompt_tokens"] == sum(tokens(p) for p in llm.prompts)
    assert response.metadata["llm_calls_saved"] == 0
    assert [n.node.node_id for n in response.source_nodes] == ["n0", "n1", "n2"]


async def test_async_twin_sends_the_same_prompts(three_nodes):
    llm = ScriptedLLM.cycle(["A1", "A2", "A3"])
    response = await get_response_synthesizer(llm=llm, response_mode="refine").asynthesize("q?", three_nodes)
    assert llm.prompts == [qa("alpha fact"), refine("A1", "beta fact"), refine("A2", "gamma fact")]
    assert response.response == "A3" and response.metadata["llm_calls"] == 3


def test_tight_window_splits_a_chunk_that_overflows_and_delivers_every_word_once():
    llm = ScriptedLLM.fixed("ok", context_window=250, num_output=50)
    long_text = " ".join(f"word{i}" for i in range(120))
    synth = get_response_synthesizer(llm=llm, response_mode="refine")
    response = synth.synthesize("q?", make_nodes(["short", long_text]))
    assert tokens(long_text) > 250 - 50 - tokens(qa(""))  # cannot fit one prompt
    assert response.metadata["llm_calls"] == llm.call_count >= 3
    assert all(tokens(p) <= 250 - 50 for p in llm.prompts)
    assert llm.prompts[0] == qa("short")
    sent = " ".join(p.split("------------\n")[1] for p in llm.prompts[1:])
    assert sent.split() == long_text.split()


def test_chunks_that_fit_are_not_split_for_a_reserve_the_answer_does_not_need():
    # core reserves 500 tokens for the existing answer and splits these ~180-token chunks; the answer is 1 token
    texts = [" ".join(f"w{i}x{j}" for j in range(60)) for i in range(3)]
    llm = ScriptedLLM.fixed("ok", context_window=800, num_output=64)
    response = get_response_synthesizer(llm=llm, response_mode="refine").synthesize("q?", make_nodes(texts))
    assert 800 - 64 - tokens(refine("", "")) - 500 < tokens(texts[0])
    assert llm.prompts == [qa(texts[0]), refine("ok", texts[1]), refine("ok", texts[2])]
    assert response.metadata["llm_calls"] == 3
    core_llm = ScriptedLLM.fixed("ok", context_window=800, num_output=64)
    CoreRefine(llm=core_llm).synthesize("q?", make_nodes(texts))
    assert core_llm.call_count > 3


def test_early_stop_without_structured_outputs_stops_on_unchanged_answer():
    llm = ScriptedLLM.cycle(["Paris", "Paris", "never sent"])
    synth = get_response_synthesizer(llm=llm, response_mode="refine", early_stop=True)
    response = synth.synthesize("q?", make_nodes(["c1", "c2", "c3", "c4"]))
    assert llm.prompts == [qa("c1"), refine("Paris", "c2")]
    assert response.response == "Paris"
    assert response.metadata["llm_calls"] == 2 and response.metadata["llm_calls_saved"] == 2


def _structured(satisfied: bool, answer: str) -> str:
    return json.dumps({"query_satisfied": satisfied, "answer": answer})


def test_structured_filtering_skips_unsatisfied_and_unparsable_replies():
    replies = {"c1": _structured(False, "irrelevant"), "c2": "not json at all", "c3": _structured(True, "from c3")}

    def answer(prompt: str) -> str:
        return next(v for k, v in replies.items() if f"\n{k}\n" in prompt)

    llm = ScriptedLLM.from_fn(answer)
    synth = get_response_synthesizer(llm=llm, response_mode="refine", structured_answer_filtering=True)
    response = synth.synthesize("q?", make_nodes(["c1", "c2", "c3"]))
    assert [c.kind for c in llm.calls] == ["chat", "chat", "chat"]
    assert all(c.tools == ["StructuredRefineResponse"] for c in llm.calls)
    # no answer yet after c1 and c2, so every call is a QA prompt
    assert [c.messages[-1].content for c in llm.calls] == [qa("c1"), qa("c2"), qa("c3")]
    assert response.response == "from c3"
    assert response.metadata["llm_calls"] == 3
    assert [s["call_index"] for s in response.metadata["skipped_chunks"]] == [1]


def test_structured_early_stop_saves_the_remaining_calls():
    llm = ScriptedLLM.cycle([_structured(True, "done"), _structured(True, "more")])
    synth = get_response_synthesizer(
        llm=llm, response_mode="refine", structured_answer_filtering=True, early_stop=True
    )
    response = synth.synthesize("q?", make_nodes(["c1", "c2", "c3", "c4"]))
    assert llm.call_count == 1
    assert response.response == "done"
    assert response.metadata["llm_calls_saved"] == 3


def test_without_early_stop_core_behaviour_keeps_refining():
    llm = ScriptedLLM.cycle([_structured(True, "done"), _structured(True, "more")])
    synth = get_response_synthesizer(llm=llm, response_mode="refine", structured_answer_filtering=True)
    response = synth.synthesize("q?", make_nodes(["c1", "c2", "c3", "c4"]))
    assert llm.call_count == 4
    assert [c.messages[-1].content for c in llm.calls][1] == refine("done", "c2")
    assert response.response == "more"


def test_all_unsatisfied_gives_the_configured_empty_response():
    llm = ScriptedLLM.fixed(_structured(False, "no"))
    synth = get_response_synthesizer(
        llm=llm, response_mode="refine", structured_answer_filtering=True, empty_response="I don't know."
    )
    assert synth.synthesize("q?", make_nodes(["c1", "c2"])).response == "I don't know."


def test_constructor_validates_options():
    with pytest.raises(ValueError, match="program_factory needs structured_answer_filtering=True"):
        Refine(ScriptedLLM.echo(), program_factory=lambda p: None)
    with pytest.raises(ValueError, match="response_padding_size must be >= 0, got -1"):
        Refine(ScriptedLLM.echo(), response_padding_size=-1)
    with pytest.raises(ValueError, match="Refine needs an LLM"):
        Refine(None)
