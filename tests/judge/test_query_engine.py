"""JudgeQueryEngine / JudgeSynthesizer end to end over real Milvus Lite with the scripted LLM."""

import pytest
from llama_index.core.base.response.schema import StreamingResponse

from llama_index_convrag.judge import (JudgeOptions, JudgeQueryEngine, JudgeSynthesizer, LLMJudge, SearchLimits,
                                       SearchTree, message_scope)

from tests.judge.conftest import DOCS, scripted
from tests.judge.test_search import ANSWERS, CITY_ONLY, ROOT_Q, TOWER_Q

ENRICHED = f"{DOCS['paris']}\n\nFollow-up question: {TOWER_Q}\nAnswer: A({TOWER_Q})"


def test_query_answers_from_the_enriched_chunks_and_returns_the_tree(retriever_k, judge_events_seen):
    llm = scripted({"paris": CITY_ONLY, "eiffel": ANSWERS})
    engine = JudgeQueryEngine.from_defaults(retriever_k(1), llm=llm, response_mode="compact")
    with message_scope("turn-7"):
        response = engine.query(ROOT_Q)
    assert response.response == f"A({ROOT_Q})"
    assert ENRICHED in llm.prompts[-1] and f"Query: {ROOT_Q}" in llm.prompts[-1]
    tree = response.metadata["judge_tree"]
    assert isinstance(tree, SearchTree) and tree.message_id == "turn-7" and tree.root.answer == f"A({ROOT_Q})"
    assert response.metadata["judge_stats"] == tree.stats.to_dict()
    assert [n.node.get_content() for n in response.source_nodes] == [ENRICHED, DOCS["eiffel"]]
    assert {e.message_id for e in judge_events_seen} == {"turn-7"}


async def test_aquery_matches_query(retriever_k):
    rules = {"paris": CITY_ONLY, "eiffel": ANSWERS}
    sync = JudgeQueryEngine.from_defaults(retriever_k(1), llm=scripted(rules)).query(ROOT_Q)
    response = await JudgeQueryEngine.from_defaults(retriever_k(1), llm=scripted(rules)).aquery(ROOT_Q)
    assert response.response == sync.response
    assert response.metadata["judge_tree"].to_dict() == sync.metadata["judge_tree"].to_dict()


def test_streaming_answers_stream_but_sub_answers_do_not(retriever_k):
    llm = scripted({"paris": CITY_ONLY, "eiffel": ANSWERS})
    response = JudgeQueryEngine.from_defaults(retriever_k(1), llm=llm, streaming=True).query(ROOT_Q)
    assert isinstance(response, StreamingResponse)
    assert "".join(response.response_gen) == f"A({ROOT_Q})"
    assert response.metadata["judge_tree"].root.chunks[0].child.answer == f"A({TOWER_Q})"


def test_everything_dropped_says_so_instead_of_the_empty_response(retriever_k):
    llm = scripted({})
    response = JudgeQueryEngine.from_defaults(retriever_k(2), llm=llm).query(ROOT_Q)
    assert response.response == ("the judge found no relevant passage: it graded 2 of 2 passage(s) 0 (not "
                                 "relevant); nothing to answer from")
    assert llm.call_count == 2  # the two grades; the synthesizer is not asked to answer from nothing
    assert [c.status for c in response.metadata["judge_tree"].chunks()] == ["dropped", "dropped"]
    assert response.metadata["judge_tree"].root.answer == response.response


async def test_everything_dropped_says_so_async_too(retriever_k):
    response = await JudgeQueryEngine.from_defaults(retriever_k(2), llm=scripted({})).aquery(ROOT_Q)
    assert response.response.startswith("the judge found no relevant passage: it graded 2 of 2 passage(s) 0")


def test_a_separate_judge_llm_grades_and_the_main_llm_answers(retriever_k):
    judge_llm = scripted({"eiffel": ANSWERS})
    llm = scripted({})
    response = JudgeQueryEngine.from_defaults(retriever_k(2), llm=llm,
                                              judge=JudgeOptions(judge_llm=judge_llm)).query(ROOT_Q)
    assert judge_llm.call_count == 2 and llm.call_count == 1
    assert response.metadata["judge_stats"]["judge_calls"] == 2


def test_limits_and_options_are_validated(retriever_k):
    llm = scripted({})
    with pytest.raises(ValueError, match="max_depth must be an integer >= 0, got -1"):
        JudgeOptions(limits=SearchLimits(max_depth=-1))
    with pytest.raises(ValueError, match="judge= excludes judge_llm="):
        JudgeOptions(judge=LLMJudge(llm), judge_llm=llm)
    with pytest.raises(ValueError, match="JudgeOptions.limits must be a SearchLimits, got 3"):
        JudgeOptions(limits=3)
    with pytest.raises(TypeError, match=r"\['max_depth'\] are options of judge=JudgeOptions"):
        JudgeQueryEngine.from_defaults(retriever_k(1), llm=llm, max_depth=1)
    with pytest.raises(ValueError, match="JudgeQueryEngine needs a judge: True, a BaseJudge or a JudgeOptions, got False"):
        JudgeQueryEngine.from_defaults(retriever_k(1), llm=llm, judge=False)
    with pytest.raises(ValueError, match="the judge needs an LLM"):
        JudgeQueryEngine.from_defaults(retriever_k(1), llm=None, response_mode="no_text")
    with pytest.raises(TypeError):
        JudgeQueryEngine.from_defaults(retriever_k(1), llm=llm, colour="red")


def test_get_response_judges_plain_text_chunks(retriever_k):
    llm = scripted({"eiffel": ANSWERS})
    engine = JudgeQueryEngine.from_defaults(retriever_k(1), llm=llm)
    synth = engine._response_synthesizer
    assert isinstance(synth, JudgeSynthesizer)
    assert synth.get_response(ROOT_Q, [DOCS["bm25"], DOCS["eiffel"]]) == f"A({ROOT_Q})"
    assert DOCS["bm25"] not in llm.prompts[-1] and DOCS["eiffel"] in llm.prompts[-1]
    assert set(synth.get_prompts()) >= {"judge:judge_prompt"}


def test_it_refuses_to_wrap_itself(retriever_k):
    engine = JudgeQueryEngine.from_defaults(retriever_k(1), llm=scripted({}))
    with pytest.raises(ValueError, match="cannot wrap another JudgeSynthesizer"):
        JudgeSynthesizer(search=engine._response_synthesizer.search, synthesizer=engine._response_synthesizer)


def test_as_query_engine_judge_true_builds_the_judge_engine(judge_index):
    llm = scripted({"paris": CITY_ONLY, "eiffel": ANSWERS})
    engine = judge_index.as_query_engine(llm=llm, judge=JudgeOptions(limits=SearchLimits(max_depth=1)),
                                         similarity_top_k=1, search_type="dense")
    assert isinstance(engine._response_synthesizer, JudgeSynthesizer)
    assert engine._response_synthesizer.search.limits.max_depth == 1
    response = engine.query(ROOT_Q)
    assert response.response == f"A({ROOT_Q})"
    assert [n.question for n in response.metadata["judge_tree"].nodes()] == [ROOT_Q, TOWER_Q]


def test_as_query_engine_judge_options_are_checked(judge_index):
    llm = scripted({})
    with pytest.raises(TypeError, match=r"\['max_depth'\] are options of judge=JudgeOptions"):
        judge_index.as_query_engine(llm=llm, max_depth=1)
    with pytest.raises(ValueError, match="judge must be True, False, None, a BaseJudge or a JudgeOptions, got 'yes'"):
        judge_index.as_query_engine(llm=llm, judge="yes")
    with pytest.raises(TypeError, match="response_synthesizer= excludes judge="):
        judge_index.as_query_engine(response_synthesizer=object(), judge=True)
    custom = LLMJudge(scripted({"eiffel": ANSWERS}))
    engine = judge_index.as_query_engine(llm=llm, judge=custom)
    assert engine._response_synthesizer.search.judge is custom
    assert not isinstance(judge_index.as_query_engine(llm=llm, judge=False)._response_synthesizer, JudgeSynthesizer)
