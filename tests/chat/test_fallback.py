"""An empty or marker-only LLM answer is never shown: one retry without the citation instruction (its sentences cited
by alignment), else the extractive answer; streamed answers are held back while they are only markers. The scripted
LLM reproduces a small model's failure: it answers ``[1]`` whenever the prompt asks for citations."""

from __future__ import annotations

from typing import Any, List

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine
from llama_index_convrag.chat.fallback import AnswerFallback, AnswerRule
from llama_index_convrag.chat.stream_pipeline import TurnStream
from llama_index_convrag.errors import ArgumentTypeError
from llama_index_convrag.prompts.synthesis import CITATION_EXAMPLE
from llama_index_convrag.synthesizers import Extractive
from llama_index_convrag.synthesizers.stream_hold import StreamHold
from llama_index_convrag.testing import ScriptedLLM
from tests.chat.conftest import DOCS, FixedRetriever

QUESTION = "Who directed Inception?"
GOOD = "Christopher Nolan directed Inception."
CITED = "Christopher Nolan directed Inception [1]."


def nodes() -> List[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=k, text=t), score=1.0 - i / 10) for i, (k, t) in enumerate(DOCS[:3])]


def marker_model(bad: str = "[1]", good: str = GOOD) -> ScriptedLLM:
    """``bad`` when asked to cite (the citation instruction), ``good`` otherwise."""
    return ScriptedLLM.from_fn(lambda prompt: bad if "square brackets" in prompt else good)


def engine(llm: Any, store: Any, embed_model: Any, **kw: Any) -> ConvRAGChatEngine:
    kw.setdefault("fallback", AnswerFallback(extractive=Extractive(embed_model)))
    kw.setdefault("citation_mode", "inline")  # the LLM is asked for markers (what makes a small model answer [1])
    return ConvRAGChatEngine.from_defaults(FixedRetriever(nodes()), llm, conversation_store=store,
                                           conversation_id="c", answer=AnswerOptions(**kw))


def held(deltas: List[str], question: Any = None) -> List[str]:
    """``deltas`` through the turn pipeline with the engine's rule (nothing stored); "recovered" for a refused one."""
    stream = TurnStream(StreamHold(rules=[AnswerRule(question)]), deltas=iter(deltas),
                        recover=lambda text: "recovered", commit=lambda status, text, error: None)
    return list(stream.iterate())


def extractive_answer(embed_model: Any) -> str:
    return str(Extractive(embed_model).synthesize(QUESTION, nodes()))


def test_a_marker_only_answer_is_retried_without_citations_and_cited_by_alignment(store, embed_model) -> None:
    llm = marker_model()
    response = engine(llm, store, embed_model).chat(QUESTION)
    assert response.response == CITED
    record = response.metadata["turn"]
    assert record.answer_source == "llm_retry_without_citations"
    assert [c["marker"] for c in record.citations] == [1] and record.citations[0]["node_id"] == "inception"
    assert len(llm.prompts) == 2 and "square brackets" in llm.prompts[0] and "square brackets" not in llm.prompts[1]
    assert "[1] Inception" in llm.prompts[0] and "[1]" not in llm.prompts[1]  # the retry's chunks are unnumbered
    stored = store.get_turn_record(response.metadata["message_id"])
    assert (stored["answer"], stored["answer_source"]) == (CITED, "llm_retry_without_citations")
    assert store.get_message(response.metadata["message_id"]).content == CITED


@pytest.mark.parametrize("bad", ["", "  [1][2].", "Source: [3]"])
def test_a_retry_that_is_markers_only_too_falls_back_to_the_extractive_answer(store, embed_model, bad) -> None:
    llm = ScriptedLLM.fixed(bad)
    response = engine(llm, store, embed_model).chat(QUESTION)
    assert response.response == extractive_answer(embed_model)
    assert response.metadata["turn"].answer_source == "extractive_fallback"
    assert llm.call_count == 2


def test_retry_false_goes_straight_to_the_extractive_answer(store, embed_model) -> None:
    llm = marker_model()
    fallback = AnswerFallback(retry=False, extractive=Extractive(embed_model))
    response = engine(llm, store, embed_model, fallback=fallback).chat(QUESTION)
    assert (response.response, llm.call_count) == (extractive_answer(embed_model), 1)
    assert response.metadata["turn"].answer_source == "extractive_fallback"


def test_an_answer_with_words_is_shown_as_written(store, embed_model) -> None:
    llm = ScriptedLLM.fixed("[1] Nolan directed it.")
    response = engine(llm, store, embed_model).chat(QUESTION)
    assert (response.response, response.metadata["turn"].answer_source, llm.call_count) == (
        "[1] Nolan directed it.", "llm", 1)


def test_without_an_llm_the_source_is_no_llm(store, embed_model) -> None:
    eng = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes()), None, answer=AnswerOptions(embed_model=embed_model),
                                          conversation_store=store, conversation_id="c")
    assert eng.chat(QUESTION).metadata["turn"].answer_source == "no_llm"


async def test_achat_recovers_the_same_way(store, embed_model) -> None:
    response = await engine(marker_model(), store, embed_model).achat(QUESTION)
    assert (response.response, response.metadata["turn"].answer_source) == (CITED, "llm_retry_without_citations")


def test_a_streamed_marker_only_answer_shows_only_the_recovered_one(store, embed_model) -> None:
    response = engine(marker_model(), store, embed_model).stream_chat(QUESTION)
    assert list(response.response_gen) == [CITED]  # "[1]" was never shown
    record = store.get_turn_record(response.message_id)
    assert (record["answer"], record["answer_source"], record["status"]) == (CITED, "llm_retry_without_citations",
                                                                             "complete")
    assert [c["marker"] for c in record["citations"]] == [1]


def test_a_streamed_answer_flows_from_its_first_word(store, embed_model) -> None:
    response = engine(ScriptedLLM.fixed("[1] Christopher Nolan [1]."), store, embed_model).stream_chat(QUESTION)
    assert list(response.response_gen) == ["[1] Christopher ", "Nolan ", "[1]."]
    assert store.get_turn_record(response.message_id)["answer_source"] == "llm"


async def test_astream_chat_recovers_the_same_way(store, embed_model) -> None:
    response = await engine(marker_model(), store, embed_model).astream_chat(QUESTION)
    assert [d async for d in response.async_response_gen()] == [CITED]
    assert store.get_turn_record(response.message_id)["answer_source"] == "llm_retry_without_citations"


def test_the_turn_record_flags_the_sentence_no_passage_supports(store, embed_model) -> None:
    llm = ScriptedLLM.fixed("Christopher Nolan directed Inception [1]. He filmed it on the Moon in 1950 [2].")
    response = engine(llm, store, embed_model).chat(QUESTION)
    assert response.metadata["turn"].grounding == {
        "method": "lexical", "support_share": 0.5, "judged": 2,
        # terms film, moon, 1950: only "film" is in a passage (1: "science fiction film")
        "unsupported": [{"sentence": 1, "text": "He filmed it on the Moon in 1950 [2].", "best_source": 1,
                         "overlap": 0.333, "reason": "overlap"}],
    }
    assert store.get_turn_record(response.metadata["message_id"])["grounding"]["unsupported"][0]["sentence"] == 1


def test_the_hold_releases_at_the_first_word() -> None:
    hold = StreamHold(rules=[AnswerRule()])
    assert [(hold.feed(d), hold.held_for) for d in [" [", "1", "]", " Tampa", " [2]"]] == [
        ("", "empty"), ("", "empty"), ("", "empty"), (" [1] Tampa", None), (" [2]", None)]


def test_the_pipeline_recovers_only_when_nothing_but_markers_came() -> None:
    assert held(["[1]", " "]) == ["recovered"]
    assert held([]) == ["recovered"]
    assert held(["Tampa", " [1]"]) == ["Tampa", " [1]"]


def test_answer_fallback_arguments_are_checked() -> None:
    with pytest.raises(ArgumentTypeError, match="retry must be a bool, got 'no'"):
        AnswerFallback(retry="no")  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match="AnswerOptions.fallback must be an AnswerFallback"):
        AnswerOptions(fallback=True)  # type: ignore[arg-type]


def test_an_answer_repeating_the_prompt_example_is_recovered(store, embed_model) -> None:
    response = engine(marker_model(bad=CITATION_EXAMPLE), store, embed_model).chat(QUESTION)
    assert (response.response, response.metadata["turn"].answer_source) == (CITED, "llm_retry_without_citations")
    streamed = engine(marker_model(bad=f'"{CITATION_EXAMPLE}"'), store, embed_model).stream_chat(QUESTION)
    assert list(streamed.response_gen) == [CITED]
    other_marker = CITATION_EXAMPLE.replace("[2]", "[1]")  # the 0.5B model's own copy
    streamed = engine(marker_model(bad=other_marker), store, embed_model).stream_chat(QUESTION)
    assert list(streamed.response_gen) == [CITED]


def test_the_pipeline_shows_a_held_answer_that_only_began_like_the_example() -> None:
    assert held(["The ", "bridge"]) == ["The bridge"]
    assert held(["The ", "tower."]) == ["The tower."]


def test_a_scenario_answer_stays_the_models_and_citations_false_adds_no_marker(store, embed_model) -> None:
    """LangChain's scenario answer "I know the answer!" is an answer (it adds words the question lacks): shown as the
    model wrote it, with no ``[n]`` and no citation, when ``citations=False``."""
    llm = ScriptedLLM.fixed("I know the answer!")
    answer = AnswerOptions(citations=False, fallback=AnswerFallback(extractive=Extractive(embed_model)))
    eng = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes()), llm, conversation_store=store,
                                          conversation_id="c", answer=answer)
    response = eng.chat("What is the answer?")
    assert (response.response, response.metadata["turn"].answer_source) == ("I know the answer!", "llm")
    assert "[" not in response.response
    assert all(c["marker"] is None for c in response.metadata["citations"])  # sources listed, none cited


def test_the_support_scorer_and_echo_rules_are_checked() -> None:
    from llama_index_convrag.chat.fallback import EchoRules

    with pytest.raises(ArgumentTypeError, match="scorer must be a callable"):
        AnswerFallback(scorer="nli")
    with pytest.raises(ArgumentTypeError, match="echo_rules must be an EchoRules, got dict"):
        AnswerFallback(echo_rules={})
    with pytest.raises(ValueError, match=r"cover must be a number in \(0, 1\], got 0"):
        EchoRules(cover=0)
