"""The chat engine with ``citation_mode="aligned"``: one LLM call with the plain prompt, the answer's sentences cited
by alignment with the passages; streamed and whole answers agree; the turn record says who placed the markers."""

from __future__ import annotations

from typing import Any

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.testing import ScriptedLLM
from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine
from tests.chat.conftest import FixedRetriever
from tests.chat.test_fallback import QUESTION, engine, marker_model, nodes

ANSWER = "Christopher Nolan directed Inception. He also directed Interstellar in 2014. It was shot on the Moon."
CITED = ("Christopher Nolan directed Inception [1]. He also directed Interstellar in 2014 [2]. "
         "It was shot on the Moon.")


def aligned(llm: Any, store: Any, embed_model: Any) -> Any:
    return engine(llm, store, embed_model, citation_mode="aligned")


def test_the_llm_is_asked_without_the_citation_instruction_and_the_answer_is_cited(store, embed_model) -> None:
    llm = ScriptedLLM.fixed(ANSWER)
    response = aligned(llm, store, embed_model).chat(QUESTION)
    assert response.response == CITED
    assert llm.call_count == 1
    assert "square brackets" not in llm.prompts[0] and "[1]" not in llm.prompts[0]  # plain QA prompt, unnumbered
    assert "Context information is below." in llm.prompts[0]  # core's QA template
    record = response.metadata["turn"]
    assert (record.answer_source, record.citation_mode) == ("llm", "aligned")
    assert [(c["marker"], c["node_id"]) for c in record.citations] == [(1, "inception"), (2, "nolan")]
    stored = store.get_turn_record(response.metadata["message_id"])
    assert (stored["answer"], stored["citation_mode"]) == (CITED, "aligned")
    assert [u["sentence"] for u in stored["grounding"]["unsupported"]] == [2]  # the Moon: in no passage


def test_stream_and_non_stream_agree(store, embed_model) -> None:
    whole = aligned(ScriptedLLM.fixed(ANSWER), store, embed_model).chat(QUESTION)
    streamed = aligned(ScriptedLLM.fixed(ANSWER), store, embed_model).stream_chat(QUESTION)
    deltas = list(streamed.response_gen)
    assert "".join(deltas) == whole.response == CITED
    # words flow, the marker at the end; the first sentence waits while the answer could still be a short one to
    # show as its passage writes it (synthesizers/completion.py: at most five words, one clause)
    assert deltas[:2] == ["Christopher Nolan directed Inception [1]. He", " also"]
    record = store.get_turn_record(streamed.message_id)
    assert (record["answer"], record["citation_mode"], record["status"]) == (CITED, "aligned", "complete")
    assert record["citations"] == whole.metadata["turn"].to_dict()["citations"]


async def test_async_stream_agrees(store, embed_model) -> None:
    streamed = await aligned(ScriptedLLM.fixed(ANSWER), store, embed_model).astream_chat(QUESTION)
    assert "".join([d async for d in streamed.async_response_gen()]) == CITED
    achat = await aligned(ScriptedLLM.fixed(ANSWER), store, embed_model).achat(QUESTION)
    assert achat.response == CITED


def test_the_record_says_inline_for_the_llms_markers_and_aligned_for_a_recovered_answer(store, embed_model) -> None:
    inline = engine(ScriptedLLM.fixed("Nolan directed it [1]."), store, embed_model).chat(QUESTION)
    assert inline.metadata["turn"].citation_mode == "inline"
    recovered = engine(marker_model(), store, embed_model).chat(QUESTION)
    assert (recovered.metadata["turn"].answer_source, recovered.metadata["turn"].citation_mode) == (
        "llm_retry_without_citations", "aligned")
    uncited = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes()), ScriptedLLM.fixed("Nolan."),
                                              conversation_store=store,
                                              answer=AnswerOptions(citations=False)).chat(QUESTION)
    assert uncited.metadata["turn"].citation_mode is None


def test_a_marker_only_aligned_answer_is_recovered_without_citing_twice(store, embed_model) -> None:
    llm = ScriptedLLM.cycle(["[1]", "Christopher Nolan directed Inception."])
    response = aligned(llm, store, embed_model).chat(QUESTION)
    assert response.response == "Christopher Nolan directed Inception [1]."
    assert response.metadata["turn"].answer_source == "llm_retry_without_citations"


def test_a_bad_citation_mode_is_refused_by_its_option_object() -> None:
    with pytest.raises(ConfigurationError, match=r"citation_mode must be one of \['inline', 'aligned'\], got 'post'"):
        AnswerOptions(citation_mode="post")


def test_the_engine_cites_aligned_unless_told(store, embed_model) -> None:
    llm = ScriptedLLM.fixed(ANSWER)
    response = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes()), llm, conversation_store=store).chat(QUESTION)
    assert (response.response, response.metadata["turn"].citation_mode) == (CITED, "aligned")
    assert "square brackets" not in llm.prompts[-1]
    inline = ScriptedLLM.fixed("Nolan directed it [1].")
    ConvRAGChatEngine.from_defaults(FixedRetriever(nodes()), inline, conversation_store=store,
                                    answer=AnswerOptions(citation_mode="inline")).chat(QUESTION)
    assert "square brackets" in inline.prompts[-1]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_short_answer_is_shown_as_its_passage_writes_it_and_the_record_says_so(store, embed_model,
                                                                                  streaming: bool) -> None:
    from llama_index.core.schema import NodeWithScore, TextNode

    passages = [NodeWithScore(node=TextNode(id_="x", text="Xenoblade Chronicles X came out in Japan on April 29, 2015."),
                              score=1.0)]
    chat = ConvRAGChatEngine.from_defaults(FixedRetriever(passages), ScriptedLLM.fixed("2015"), conversation_store=store,
                                           conversation_id="c")
    question = "When did Xenoblade Chronicles X come out in Japan?"
    if streaming:
        response = chat.stream_chat(question)
        text, message_id = "".join(response.response_gen), response.message_id
    else:
        response = chat.chat(question)
        text, message_id = response.response, response.metadata["turn"].assistant_message_id
    assert text == "April 29, 2015 [1]"
    record = store.get_turn_record(message_id)
    assert record["answer_completion"] == {"answer": "2015", "shown": "April 29, 2015", "passage": 1}
    assert (record["answer"], record["answer_source"]) == (text, "llm")
    assert [c["node_id"] for c in record["citations"]] == ["x"]
