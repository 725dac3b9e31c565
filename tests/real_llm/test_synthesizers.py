"""Every response mode, citations, streaming and structured answer filtering on the real model's output."""

from typing import List

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.config import OpenAICompatible
from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.synthesizers.registry import lookup_mode, registered_modes

pytestmark = pytest.mark.real_llm

PASSAGES = [
    "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    "Green tea should steep for two minutes in water at eighty degrees.",
    "The Eiffel Tower is 330 metres tall including its antennas.",
]
QUESTION = "When was the Eiffel Tower completed?"


def nodes() -> List[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 10) for i, t in enumerate(PASSAGES)]


LLM_MODES = [m for m in registered_modes() if lookup_mode(m).requires_llm]


@pytest.mark.parametrize("mode", LLM_MODES)
def test_every_llm_mode_answers_from_the_context(real_llm, mode: str) -> None:
    response = get_response_synthesizer(llm=real_llm, response_mode=mode).synthesize(QUESTION, nodes())
    assert response.response and response.response.strip()
    if mode != "generation":  # generation ignores the context by design
        assert "1889" in response.response, response.response
    assert response.metadata["llm_calls"] >= 1


async def test_streaming_sync_and_async_match_the_final_text(real_llm) -> None:
    synth = get_response_synthesizer(llm=real_llm, response_mode="compact", streaming=True)
    deltas = list(synth.synthesize(QUESTION, nodes()).response_gen)
    adeltas = [d async for d in (await synth.asynthesize(QUESTION, nodes())).async_response_gen()]
    assert len(deltas) > 1 and "".join(deltas) == "".join(adeltas)  # greedy decoding: same text both ways


def test_citations_map_to_given_sources_and_count_invented_ones(real_llm) -> None:
    response = get_response_synthesizer(llm=real_llm, response_mode="compact", citations=True).synthesize(
        QUESTION, nodes())
    cited = response.metadata["citations"]
    assert all(1 <= c["marker"] <= len(PASSAGES) and c["node_id"] == f"n{c['marker'] - 1}" for c in cited)
    assert all(not 1 <= n <= len(PASSAGES) for n in response.metadata["invalid_citation_markers"])


@pytest.mark.parametrize("function_calling", [True, False], ids=["tool-calls", "text-json"])
def test_structured_answer_filtering_parses_or_skips_with_a_reason(real_llm_server, function_calling) -> None:
    llm = OpenAICompatible(**real_llm_server.client_kwargs(max_tokens=256, function_calling=function_calling))
    synth = get_response_synthesizer(llm=llm, response_mode="refine", structured_answer_filtering=True)
    response = synth.synthesize(QUESTION, nodes())
    skipped = response.metadata["skipped_chunks"]
    assert len(skipped) < len(PASSAGES), skipped  # at least one reply parsed
    assert all(s["error"] for s in skipped)
    assert "1889" in (response.response or "")
