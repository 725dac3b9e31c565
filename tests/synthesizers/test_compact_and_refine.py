"""Compact: core's windows, exact prompts, extras counted (core overflows with the same input)."""

import pytest
from llama_index.core.prompts import PromptTemplate
from llama_index.core.response_synthesizers import CompactAndRefine as CoreCompact

from llama_index_convrag.synthesizers import CompactAndRefine, get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

from .conftest import make_nodes, qa, tokens

TEXTS = [" ".join(f"fact{i}x{j}" for j in range(30)) for i in range(8)]


def test_small_input_is_one_call_with_all_chunks(three_nodes):
    llm = ScriptedLLM.fixed("A")
    response = get_response_synthesizer(llm=llm).synthesize("q?", three_nodes)
    assert llm.prompts == [qa("alpha fact\n\nbeta fact\n\ngamma fact")]
    assert response.metadata["llm_calls"] == 1


def test_tight_window_packs_as_core_does_with_room_for_an_answer_of_num_output():
    """Core's windows (its splitter at word boundaries, 10% overlap) with the room kept for the existing answer cut
    to what the LLM can write: core with ``response_padding_size=num_output`` sends exactly our prompts; with its
    default 500 it needs more calls. Every prompt fits and every fact reaches the LLM, in order."""
    llm = ScriptedLLM.fixed("A", context_window=900, num_output=64)
    response = get_response_synthesizer(llm=llm).synthesize("q?", make_nodes(TEXTS))
    core_llm = ScriptedLLM.fixed("A", context_window=900, num_output=64)
    CoreCompact(llm=core_llm, response_padding_size=64).synthesize("q?", make_nodes(TEXTS))
    assert llm.prompts == core_llm.prompts
    core_default = ScriptedLLM.fixed("A", context_window=900, num_output=64)
    CoreCompact(llm=core_default).synthesize("q?", make_nodes(TEXTS))
    assert llm.call_count == response.metadata["llm_calls"] == 2 and core_default.call_count == 4
    assert llm.prompts[0].startswith(qa("")[:40]) and all(p.startswith("The original") for p in llm.prompts[1:])
    assert all(tokens(p) <= 900 - 64 for p in llm.prompts)
    sent = "".join("".join(p.split()) for p in llm.prompts)
    assert all(sent.count(f"fact{i}x29") >= 1 for i in range(8))
    assert [sent.index(f"fact{i}x0") for i in range(8)] == sorted(sent.index(f"fact{i}x0") for i in range(8))


def test_response_padding_size_below_num_output_is_the_room_kept():
    """``response_padding_size`` smaller than ``num_output`` is used as given (0: the fullest windows)."""
    full = ScriptedLLM.fixed("A", context_window=900, num_output=64)
    CompactAndRefine(llm=full, response_padding_size=0).synthesize("q?", make_nodes(TEXTS))
    core_llm = ScriptedLLM.fixed("A", context_window=900, num_output=64)
    CoreCompact(llm=core_llm, response_padding_size=0).synthesize("q?", make_nodes(TEXTS))
    assert full.prompts == core_llm.prompts


def test_a_long_extra_variable_leaving_no_room_names_the_terms():
    llm = ScriptedLLM.fixed("A", context_window=600, num_output=64)
    synth = get_response_synthesizer(llm=llm, text_qa_template=CHAT_QA)
    with pytest.raises(ValueError, match=r"no room for context: context_window 600 - num_output 64 - padding 64 - "
                                         r"the prompt \(template, query, extra variables \['chat_history'\]\)"):
        synth.synthesize("q?", make_nodes(TEXTS), chat_history=" ".join(f"turn{i}" for i in range(600)))
    assert llm.call_count == 0


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
    assert response.metadata["llm_calls_saved"] == 1  # 2 windows at this size (see the tight-window test)


def test_chat_models_get_core_chat_templates(three_nodes):
    llm = ScriptedLLM.fixed("A", chat_model=True)
    response = get_response_synthesizer(llm=llm).synthesize("q?", three_nodes)
    messages = llm.calls[0].messages
    assert [m.role.value for m in messages] == ["system", "user"]
    assert messages[1].content == qa("alpha fact\n\nbeta fact\n\ngamma fact")
    assert response.metadata["prompt_tokens"] == tokens(llm.prompts[0])


class CharTokenizer:
    """One token per character (a stand-in for a model's own tokenizer)."""

    def encode(self, text: str) -> list:
        return [ord(c) for c in text]

    def decode(self, ids) -> str:
        return "".join(chr(i) for i in ids)


def test_tokenizer_is_the_one_compact_packs_with():
    """``tokenizer=`` measures the windows (the prompt helper built from the LLM counts with it)."""
    by_chars = ScriptedLLM.fixed("A", context_window=2000, num_output=64)
    get_response_synthesizer(llm=by_chars, tokenizer=CharTokenizer()).synthesize("q?", make_nodes(TEXTS))
    default = ScriptedLLM.fixed("A", context_window=2000, num_output=64)
    get_response_synthesizer(llm=default).synthesize("q?", make_nodes(TEXTS))
    assert default.call_count == 1 and by_chars.call_count > 1
    assert all(len(p) <= 2000 - 64 for p in by_chars.prompts)
