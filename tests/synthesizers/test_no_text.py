from llama_index_convrag.synthesizers import NoText, get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM


def test_no_call_and_sources_kept(three_nodes):
    llm = ScriptedLLM.fixed("x")
    response = get_response_synthesizer(llm=llm, response_mode="no_text").synthesize("q?", three_nodes)
    assert llm.call_count == 0
    assert response.response == "" and len(response.source_nodes) == 3
    assert response.metadata["llm_calls"] == 0 and response.metadata["prompt_tokens"] == 0


def test_needs_no_llm(three_nodes):
    assert NoText().synthesize("q?", three_nodes).response == ""
    assert get_response_synthesizer(response_mode="no_text").synthesize("q?", three_nodes).response == ""
