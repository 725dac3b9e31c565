"""``as_chat_engine(answer=AnswerOptions(judge=True))``: judge-guided turns, the tree persisted with the turn and events under its id."""

import re

import pytest

from llama_index_convrag.chat import AnswerOptions, RewriteOptions
from llama_index_convrag.chat.fallback import AnswerFallback
from llama_index_convrag.judge import JudgeOptions, JudgeSynthesizer, SearchLimits, SearchTree

from tests.judge.conftest import scripted
from tests.judge.test_search import ANSWERS, CITY_ONLY, ROOT_Q, TOWER_Q


def engine_for(judge_index, llm, judge=True):
    # the scripted answer wraps the question ("A(<question>)"), a near-verbatim echo the default fallback replaces;
    # these tests follow the judged answer itself, so the echo is shown as it is (echo=False)
    return judge_index.as_chat_engine(llm=llm, retriever_kwargs={"similarity_top_k": 1, "search_type": "dense"},
                                      rewrite=RewriteOptions(strategy="none"),
                                      answer=AnswerOptions(judge=judge, citation_mode="inline",
                                                           fallback=AnswerFallback(echo=False)))


def test_a_judged_turn_returns_and_stores_its_tree(judge_index, judge_events_seen):
    llm = scripted({"paris": CITY_ONLY, "eiffel": ANSWERS})
    engine = engine_for(judge_index, llm, JudgeOptions(limits=SearchLimits(max_depth=1)))
    assert isinstance(engine._synthesizer, JudgeSynthesizer)
    response = engine.chat(ROOT_Q)
    message_id = response.metadata["message_id"]
    assert response.response.startswith(f"A({ROOT_Q})")
    tree = SearchTree.from_dict(response.metadata["judge_tree"])
    assert [n.question for n in tree.nodes()] == [ROOT_Q, TOWER_Q]
    assert (tree.message_id, tree.limits["max_depth"]) == (message_id, 1)
    stored = engine.store.get_turn_record(message_id)
    assert stored["judge_tree"] == response.metadata["judge_tree"]
    assert judge_events_seen and {e.message_id for e in judge_events_seen} == {message_id}


def test_a_streamed_judged_turn_stores_its_tree(judge_index):
    llm = scripted({"paris": CITY_ONLY, "eiffel": ANSWERS})
    engine = engine_for(judge_index, llm)
    stream = engine.stream_chat(ROOT_Q)
    text = "".join(stream.response_gen)
    assert text.startswith(f"A({ROOT_Q})")
    record = engine.store.get_turn_record(stream.message_id)
    assert [c["status"] for c in record["judge_tree"]["root"]["chunks"]] == ["enriched"]


async def test_an_async_judged_turn_matches(judge_index):
    llm = scripted({"paris": CITY_ONLY, "eiffel": ANSWERS})
    response = await engine_for(judge_index, llm).achat(ROOT_Q)
    assert response.metadata["judge_tree"]["stats"]["sub_questions"] == 1


def test_judge_needs_the_condense_question_mode_with_a_retriever(judge_index):
    llm = scripted({})
    with pytest.raises(TypeError, match=r"AnswerOptions\(judge=...\) needs chat_mode='condense_question'"):
        judge_index.as_chat_engine(llm=llm, answer=AnswerOptions(judge=True), chat_mode="context")
    plain = judge_index.as_chat_engine(llm=llm)
    assert not isinstance(plain._synthesizer, JudgeSynthesizer)
    assert "judge_tree" not in plain.chat("What is Milvus?").metadata


def test_the_old_judge_keywords_name_the_one_argument_that_replaced_them(judge_index):
    llm = scripted({})
    for old in ({"max_depth": 1}, {"judge_llm": llm, "max_llm_calls": 3}):
        with pytest.raises(TypeError, match=re.escape(f"does not take {sorted(old)!r}") + ".*" + re.escape(
                "now answer=AnswerOptions(judge=JudgeOptions(...))")):
            judge_index.as_chat_engine(llm=llm, **old)
    with pytest.raises(ValueError, match="judge must be True, False, None, a BaseJudge or a JudgeOptions, got 'yes'"):
        AnswerOptions(judge="yes")
