"""Compact: windows filled to the bound, exact prompts, extras counted (core overflows with the same input)."""

import math

from llama_index.core.prompts import PromptTemplate
from llama_index.core.response_synthesizers import CompactAndRefine as CoreCompact

from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

from .conftest import make_nodes, qa, refine, tokens

TEXTS = [" ".join(f"fact{i}x{j}" for j in range(30)) for i in range(8)]


def test_small_input_is_one_call_with_all_chunks(three_nodes):
    llm = ScriptedLLM.fixed("A")
    response = get_response_synthesizer(llm=llm).synthesize("q?", three_nodes)
    assert llm.prompts == [qa("alpha fact\n\nbeta fact\n\ngamma fact")]
    assert response.metadata["llm_calls"] == 1


def test_tight_window_packs_to_the_lower_bound():
    llm = ScriptedLLM.fixed("A", context_window=900, num_output=64)
    response = get_response_synthesizer(llm=llm).synthesize("q?", make_nodes(TEXTS))
    # room kept for the existing answer: min(500, num_output) (the LLM writes at most num_output tokens)
    budget = 900 - 64 - max(tokens(qa("")) + 5, tokens(refine("", "")) + 64 + 5)
    total = sum(tokens(t + "\n\n") for t in TEXTS)
    assert llm.call_count == response.metadata["llm_calls"] == math.ceil(total / budget) == 2
    assert llm.prompts[0].startswith(qa("")[:40]) and all(p.startswith("The original") for p in llm.prompts[1:])
    assert all(tokens(p) <= 900 - 64 for p in llm.prompts)
    # every fact reached the LLM exactly once, in order
    sent = "".join("".join(p.split()) for p in llm.prompts)
    assert [sent.count(f"fact{i}x29") for i in range(8)] == [1] * 8


CHAT_QA = PromptTemplate(
    "History:\n{chat_history}\nContext:\n{context_str}\nQuestion: {query_str}\nAnswer: "
)


def test_extra_variables_are_counted_in_the_budget():
    history = " ".join(f"turn{i}" for i in range(600))
    nodes = make_nodes(TEXTS)
    ours_llm = ScriptedLLM.fixed("A", context_window=2000, num_output=64)
    ours = get_response_synthesizer(llm=ours_llm, text_qa_template=CHAT_QA)
    response = ours.synthesize("q?", nodes, chat_history=history)
    assert all(tokens(p) <= 2000 - 64 for p in ours_llm.prompts)
    assert ours_llm.prompts[0].startswith(f"History:\n{history}\nContext:\n{TEXTS[0]}")
    without = ScriptedLLM.fixed("A", context_window=2000, num_output=64)
    get_response_synthesizer(llm=without, text_qa_template=CHAT_QA).synthesize("q?", nodes, chat_history="")
    assert response.metadata["llm_calls"] > without.call_count  # the history took room from the context

    core_llm = ScriptedLLM.fixed("A", context_window=2000, num_output=64)
    core = CoreCompact(llm=core_llm, text_qa_template=CHAT_QA)
    core.synthesize("q?", nodes, chat_history=history)
    assert max(tokens(p) for p in core_llm.prompts) > 2000 - 64  # core packed as if the history were empty


async def test_async_compact_matches_sync():
    sync_llm = ScriptedLLM.fixed("A", context_window=900, num_output=64)
    async_llm = ScriptedLLM.fixed("A", context_window=900, num_output=64)
    get_response_synthesizer(llm=sync_llm).synthesize("q?", make_nodes(TEXTS))
    await get_response_synthesizer(llm=async_llm).asynthesize("q?", make_nodes(TEXTS))
    assert async_llm.prompts == sync_llm.prompts


def test_structured_early_stop_saves_the_remaining_windows():
    import json

    llm = ScriptedLLM.fixed(json.dumps({"query_satisfied": True, "answer": "found"}), context_window=900, num_output=64)
    synth = get_response_synthesizer(llm=llm, structured_answer_filtering=True, early_stop=True)
    response = synth.synthesize("q?", make_nodes(TEXTS))
    assert llm.call_count == 1 and response.response == "found"
    assert response.metadata["llm_calls_saved"] == 1  # 2 windows at this size (see the lower-bound test)


def test_chat_models_get_core_chat_templates(three_nodes):
    llm = ScriptedLLM.fixed("A", chat_model=True)
    response = get_response_synthesizer(llm=llm).synthesize("q?", three_nodes)
    messages = llm.calls[0].messages
    assert [m.role.value for m in messages] == ["system", "user"]
    assert messages[1].content == qa("alpha fact\n\nbeta fact\n\ngamma fact")
    assert response.metadata["prompt_tokens"] == tokens(llm.prompts[0])
