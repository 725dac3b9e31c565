"""A short answer shown as its passage writes it (synthesizers/completion.py), whole and streamed."""

from __future__ import annotations

import asyncio
from typing import List

import pytest

from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.synthesizers.completion import (
    COMPLETION_KEY,
    Completion,
    answer_core,
    complete_answer,
    complete_span,
)
from llama_index_convrag.testing import ScriptedLLM

from tests.synthesizers.conftest import make_nodes


@pytest.mark.parametrize(("answer", "passage", "question", "shown"), [
    ("2015", "Xenoblade Chronicles X was published in Japan on April 29, 2015.", "When was Xenoblade published?",
     "April 29, 2015"),
    ("2015", "It came out on 29 April 2015 in Japan.", "When did it come out in Japan?", "29 April 2015"),
    ("2015", "OpenAI was founded in December 2015 by Elon Musk.", "When was OpenAI founded?", "December 2015"),
    ("April 29", "It was released on April 29, 2015 in Japan.", "When was it released?", "April 29, 2015"),
    ("10,000", "We got $10,000 in seed funding from Julian.", "How much seed funding?", "$10,000"),
    ("6.1", "China's economy grew 6.1% in 2019.", "How much did China's economy grow?", "6.1%"),
    ("2.5", "The deal was worth 2.5 billion dollars.", "What was the deal worth?", "2.5 billion"),
    ("1465", "2019年全年出生人口1465万人。", "2019年出生人口", "1465万"),
    ("7.0", "芦山发生7.0级强烈地震。", "芦山地震的震级", "7.0级"),
    ("2008年", "汶川地震发生于北京时间2008年5月12日14时28分。", "汶川地震的时间", "2008年5月12日"),
    ("2008", "汶川地震发生于2008年5月12日。", "汶川地震的时间", "2008年5月12日"),
    ("斯皮尔伯格", "电影《头号玩家》是史蒂文·斯皮尔伯格导演的一部科幻片。", "《头号玩家》的导演是谁", "史蒂文·斯皮尔伯格"),
])
def test_a_short_answer_widens_to_the_passages_expression(answer: str, passage: str, question: str,
                                                          shown: str) -> None:
    assert complete_span(answer, ["Unrelated text.", passage], question) == Completion(answer, shown, 2)


@pytest.mark.parametrize(("answer", "passages"), [
    ("2015", ["It was founded in 2015."]),  # nothing around it to widen
    ("史蒂文", ["由史蒂文·斯皮尔伯格执导。"]),  # where a given name's surname ends is not known
    ("Tampa Bay", ["Super Bowl LV was held in Tampa Bay, Florida."]),  # a place is not widened
    ("2016", ["It was founded in December 2015."]),  # not in any passage
    ("It was founded in 2015 by several researchers.", ["It was founded in December 2015 by several researchers."]),
    ("Founded in 2015. By Musk", ["Founded in December 2015. By Musk"]),  # two clauses
])
def test_what_is_left_as_it_is(answer: str, passages: List[str]) -> None:
    question = "When was it founded, held or directed, 史蒂文?"
    assert complete_span(answer, passages, question) is None
    assert complete_answer(answer, passages, question) == (answer, None)


def test_the_short_answer_is_read_without_markers_quotes_and_end_punctuation() -> None:
    assert answer_core("“2015” [1].") == "2015"
    assert answer_core("It rose 6.1 percent") == "It rose 6.1 percent"  # a decimal point ends no clause
    assert answer_core("one two three four five six") is None  # over five words
    assert answer_core("二零零八年五月十二日下午两点二十八分") is None  # over ten characters with Chinese
    assert complete_answer("2015 [1].", ["Published on April 29, 2015."], "When was it published?") == (
        "April 29, 2015 [1].", Completion("2015", "April 29, 2015", 1))


def test_the_place_whose_sentence_matches_the_question_is_taken() -> None:
    passages = ["GPT-2 was shown in February 2019.", "OpenAI released GPT-3 in June 2020. GPT-4 came in March 2023."]
    assert complete_span("2020", passages, "When was GPT-3 released?").shown == "June 2020"
    # a widening far from the question (under half the best place's shared terms) is not taken
    far = ["The Tour de France 2021 was won by Tadej Pogačar in Paris.", "Sales rose in May 2021."]
    assert complete_span("2021", far, "Who won the Tour de France 2021?") is None


def test_a_dateline_is_never_taken_and_a_name_the_question_holds_is_never_widened() -> None:
    # the only place of "2020" is a dateline, which shares no term with the question
    assert complete_span("2020", ["Apr 30, 2020 .", "Valhalla was released on November 10."],
                         "When was Valhalla released?") is None
    # "林肯" restates the question's subject; a year the question holds is still widened to the day
    assert complete_span("林肯", ["约翰·布斯刺杀了亚伯拉罕·林肯。"], "谁刺杀了林肯？") is None
    assert complete_span("2008年", ["汶川地震发生于2008年5月12日。"], "2008年汶川地震的时间").shown == "2008年5月12日"


def test_a_function_word_before_a_chinese_name_stays_out() -> None:
    assert complete_span("斯皮尔伯格", ["导演是史蒂文·斯皮尔伯格。"], "导演是谁").shown == "史蒂文·斯皮尔伯格"
    assert complete_span("斯皮尔伯格", ["导演是·斯皮尔伯格。"], "导演是谁") is None


TEXTS = ["Xenoblade Chronicles X was released in Japan on April 29, 2015 by Nintendo.",
         "Green tea should steep for two minutes."]


def test_an_aligned_synthesizer_widens_then_cites_and_says_so() -> None:
    nodes = make_nodes(TEXTS)
    synth = get_response_synthesizer(llm=ScriptedLLM.fixed("2015"), citations=True, citation_mode="aligned")
    response = synth.synthesize("When was Xenoblade Chronicles X released in Japan?", nodes)
    assert str(response) == "April 29, 2015 [1]"
    assert response.metadata[COMPLETION_KEY] == {"answer": "2015", "shown": "April 29, 2015", "passage": 1}
    streamed = get_response_synthesizer(llm=ScriptedLLM.fixed("2015"), citations=True, citation_mode="aligned",
                                        streaming=True).synthesize("When was it released in Japan?", nodes)
    assert "".join(streamed.response_gen) == "April 29, 2015 [1]"
    assert streamed.metadata[COMPLETION_KEY]["shown"] == "April 29, 2015"
    assert [c["marker"] for c in streamed.metadata["citations"]] == [1]


def test_async_stream_widens_too() -> None:
    async def main() -> str:
        synth = get_response_synthesizer(llm=ScriptedLLM.fixed("2015"), citations=True, citation_mode="aligned",
                                          streaming=True)
        response = await synth.asynthesize("When was it released?", make_nodes(TEXTS))
        return "".join([d async for d in response.async_response_gen()])

    assert asyncio.run(main()) == "April 29, 2015 [1]"


@pytest.mark.parametrize("kw", [{"citations": True, "citation_mode": "inline"}, {"citations": False}])
def test_other_citation_modes_show_the_models_text_as_it_is(kw: dict) -> None:
    response = get_response_synthesizer(llm=ScriptedLLM.fixed("2015"), **kw).synthesize("When?", make_nodes(TEXTS))
    assert str(response) == "2015"
    assert COMPLETION_KEY not in response.metadata
