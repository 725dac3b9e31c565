"""An answer that only restates the question ("香港第五任行政长官[1]" for "香港第五任行政长官？", as a small model answers a
keyword query) is no answer: the engine shows the extractive answer instead, says so in the turn record's warnings,
and never streams the echo."""

from __future__ import annotations

from typing import Any

import pytest

from llama_index_convrag.chat.fallback import ECHO, EMPTY, AnswerRule, is_echo, no_answer
from llama_index_convrag.synthesizers.stream_hold import StreamHold
from llama_index_convrag.testing import ScriptedLLM
from tests.chat.test_fallback import QUESTION, engine, extractive_answer, held


@pytest.mark.parametrize("answer, question", [
    ("2021-2021赛季欧冠冠军[1]", "2020-2021赛季欧冠冠军"),
    ("香港第五任行政长官[1]", "香港第五任行政长官？"),
    ("2018年人口出生率[1]", "中国2018年人口出生率"),
    ("2018年俄罗斯世界杯的冠军[1]", "2018俄罗斯世界杯的冠军"),  # 年 is no content, nor length (FUNCTION_CHARS)
    ("世界杯的冠军是[1]", "世界杯冠军"),
    ("Directed: Inception [1].", "Who directed Inception?"),
    ("Inception: who directed Inception, and who directed it?", "Who directed Inception?"),  # near-verbatim
])
def test_an_answer_adding_nothing_to_the_question_is_an_echo(answer: str, question: str) -> None:
    assert is_echo(answer, question) and no_answer(answer, question) == ECHO


@pytest.mark.parametrize("answer, question", [
    ("Christopher Nolan [1].", "Who directed Inception?"),  # a new name
    ("2008年[1]", "2008年汶川地震的时间"),  # adds nothing, but restates too little of it (a partial answer)
    ("Venus.", "Which is bigger, Mars or Venus?"),  # a choice the question offers
    ("Paris is the capital of France.", "Is Paris the capital of France?"),  # yes/no: the statement is the answer
    ("是的，北京是中国的首都。", "北京是中国的首都吗？"),
    ("Inception [1].", "Who directed Inception?"),  # the model's own answer: half the question, not a restatement
    ("Paul Graham.", "What did Paul Graham write?"),
    ("You would stop.", "What do I do about stop signs?"),  # a real human answer (CAsT)
])
def test_an_answer_that_says_something_is_not(answer: str, question: str) -> None:
    assert not is_echo(answer, question)


def test_an_empty_answer_stays_empty_whatever_the_question() -> None:
    assert no_answer(" [1] ", QUESTION) == EMPTY and no_answer("Nolan.", None) is None


def test_a_stream_is_held_while_it_could_still_restate_the_question() -> None:
    hold = StreamHold(rules=[AnswerRule("2019-2020赛季欧冠冠军")])
    # "2019-20" could go on as "2019-2020" (a word the next delta may continue is not judged); 是 adds nothing
    deltas = ["2019-20", "20赛季", "欧冠冠军是", "拜仁", "慕尼黑"]
    assert [(hold.feed(d), hold.held_for) for d in deltas] == [
        ("", "echo"), ("", "echo"), ("", "echo"), ("2019-2020赛季欧冠冠军是拜仁", None), ("慕尼黑", None)]
    assert held(["2019-20", "20赛季欧冠", "冠军[1]"], "2019-2020赛季欧冠冠军") == ["recovered"]


def test_an_echo_is_answered_by_the_extractive_answer_without_a_second_llm_call(store, embed_model) -> None:
    echo = "Directed: Inception [1]."
    llm = ScriptedLLM.fixed(echo)
    response = engine(llm, store, embed_model).chat(QUESTION)
    record = response.metadata["turn"]
    assert response.response == extractive_answer(embed_model)
    assert (record.answer_source, llm.call_count) == ("extractive_fallback", 1)
    assert record.warnings == ["the model's answer only restated the question ('Directed: Inception [1].'); shown: the "
                               "passages' sentences closest to the question"]
    assert store.get_message(response.metadata["message_id"]).content == extractive_answer(embed_model)


def test_a_streamed_echo_is_never_shown(store, embed_model) -> None:
    streamed = engine(ScriptedLLM.fixed("Directed: Inception [1]."), store, embed_model).stream_chat(QUESTION)
    assert list(streamed.response_gen) == [extractive_answer(embed_model)]
    assert streamed.metadata["turn"].answer_source == "extractive_fallback"


async def test_an_async_streamed_echo_is_never_shown(store, embed_model) -> None:
    streamed = await engine(ScriptedLLM.fixed("Directed: Inception [1]."), store, embed_model).astream_chat(QUESTION)
    assert [d async for d in streamed.async_response_gen()] == [extractive_answer(embed_model)]


def test_an_answer_restating_the_question_is_held_until_it_adds_a_term(store: Any, embed_model: Any) -> None:
    # "Inception was directed by" adds nothing to "Who directed Inception?"; "Christopher" does
    # (inline: an aligned answer is also held while it could be a short one, synthesizers/completion.py)
    streamed = engine(ScriptedLLM.fixed("Inception was directed by Christopher Nolan."), store, embed_model,
                      citation_mode="inline").stream_chat(QUESTION)
    deltas = list(streamed.response_gen)
    assert deltas[:2] == ["Inception was directed by Christopher ", "Nolan."]  # held until a new term
    assert streamed.metadata["turn"].answer_source == "llm"


def test_echo_false_shows_the_answer_as_it_is(store, embed_model) -> None:
    from llama_index_convrag.chat.fallback import AnswerFallback
    from llama_index_convrag.synthesizers import Extractive

    fallback = AnswerFallback(echo=False, extractive=Extractive(embed_model))
    response = engine(ScriptedLLM.fixed("Inception [1]."), store, embed_model, fallback=fallback).chat(QUESTION)
    assert (response.response, response.metadata["turn"].answer_source) == ("Inception [1].", "llm")
