from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

from .conftest import make_nodes, qa, tokens


def test_one_call_with_every_chunk(three_nodes):
    llm = ScriptedLLM.fixed("S")
    response = get_response_synthesizer(llm=llm, response_mode="simple_summarize").synthesize("q?", three_nodes)
    assert llm.prompts == [qa("alpha fact\n\nbeta fact\n\ngamma fact")]
    assert response.response == "S" and response.metadata["llm_calls"] == 1


def test_tight_window_truncates_to_one_call():
    texts = [" ".join(f"fact{i}x{j}" for j in range(30)) for i in range(6)]
    llm = ScriptedLLM.fixed("S", context_window=600, num_output=64)
    get_response_synthesizer(llm=llm, response_mode="simple_summarize").synthesize("q?", make_nodes(texts))
    assert llm.call_count == 1
    assert tokens(llm.prompts[0]) <= 600 - 64
    assert "fact0x0" in llm.prompts[0] and "fact5x29" not in llm.prompts[0]


def test_empty_llm_answer_becomes_the_empty_response(three_nodes):
    synth = get_response_synthesizer(llm=ScriptedLLM.fixed(""), response_mode="simple_summarize", empty_response="-")
    assert synth.synthesize("q?", three_nodes).response == "-"
