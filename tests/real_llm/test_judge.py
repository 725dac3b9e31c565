"""The chunk judge on the real model: tool calls and text replies both parse into a grade, and a judged query runs.

Whether the grades are right is the model's judgement, measured in bench/judge.py, not asserted: Qwen2.5-0.5B
replied ``{"grade": 0, "reason": "The passage is irrelevant.", "follow_up": ""}`` to every RGB passage, the
answering ones included (the rubric's last line, echoed).
"""

import pytest

from llama_index_convrag.config import OpenAICompatible
from llama_index_convrag.judge import GRADES, JudgeOptions, JudgeQueryEngine, LLMJudge, SearchLimits
from tests.chat.conftest import index, retriever  # noqa: F401 - fixtures

pytestmark = pytest.mark.real_llm

QUESTION = "When was the Eiffel Tower completed?"
CHUNKS = ["The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
          "Green tea should steep for two minutes in water at eighty degrees."]


@pytest.mark.parametrize("function_calling", [True, False], ids=["tool-calls", "text-json"])
def test_replies_parse_into_grades(real_llm_server, function_calling) -> None:
    llm = OpenAICompatible(**real_llm_server.client_kwargs(max_tokens=128, function_calling=function_calling))
    judge = LLMJudge(llm, function_calling=function_calling)
    verdicts = [judge.grade(QUESTION, chunk) for chunk in CHUNKS]
    assert all(v.error is None and v.grade in GRADES for v in verdicts), verdicts


def test_a_judged_query_grades_every_retrieved_chunk(real_llm, retriever) -> None:  # noqa: F811
    response = JudgeQueryEngine.from_defaults(retriever, llm=real_llm,
                                              judge=JudgeOptions(limits=SearchLimits(max_depth=1))).query("Who directed Inception?")
    tree = response.metadata["judge_tree"]
    assert tree.status == "complete" and len(tree.root.chunks) == 3
    assert all(c.grade in GRADES and c.error is None for c in tree.root.chunks), tree.to_dict()
