from llama_index_convrag.synthesizers import ContextOnly, get_response_synthesizer


def test_chunks_joined_without_llm(three_nodes):
    response = get_response_synthesizer(response_mode="context_only").synthesize("q?", three_nodes)
    assert response.response == "alpha fact\n\nbeta fact\n\ngamma fact"
    assert response.metadata["llm_calls"] == 0


async def test_citations_number_the_context(three_nodes):
    response = await ContextOnly(citations=True).asynthesize("q?", three_nodes)
    assert response.response == "[1] alpha fact\n\n[2] beta fact\n\n[3] gamma fact"
    assert [c["node_id"] for c in response.metadata["citations"]] == ["n0", "n1", "n2"]
