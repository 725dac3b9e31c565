"""TreeSearch over a real Milvus Lite index with a scripted judge keyed by passage."""

import asyncio
import threading

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.judge import (
    JudgeChunkGradedEvent,
    JudgeSearchEndEvent,
    JudgeSubAnswerEvent,
    JudgeSubQuestionEvent,
    LLMJudge,
    SearchCancelled,
    SearchLimits,
    TreeSearch,
    enrich,
    normalize_question,
)
from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.testing import ScriptedFailure

from tests.judge.conftest import DOCS, JUDGE_MARK, judge_prompts, passage_key, scripted

ROOT_Q = "When was the tower in the French capital built?"
TOWER_Q = "When was the Eiffel Tower built?"
CITY_ONLY = {"grade": 1, "reason": "names the city only", "follow_up": TOWER_Q}
ANSWERS = {"grade": 2, "reason": "gives the year"}


def make_search(retriever, llm, **limits) -> TreeSearch:
    return TreeSearch(retriever=retriever, judge=LLMJudge(llm),
                      answerer=get_response_synthesizer(llm=llm, response_mode="compact"),
                      limits=SearchLimits(**limits))


def shape(tree):
    """(path, question, [(doc, grade, status, note)]) per question node, depth first."""
    return [(n.path, n.question, [(c.doc_id, c.grade, c.status, c.note) for c in n.chunks]) for n in tree.nodes()]


def test_a_chunk_graded_two_stops_the_search_at_this_level(retriever_k):
    llm = scripted({"paris": CITY_ONLY, "eiffel": ANSWERS})
    result = make_search(retriever_k(2), llm).search(ROOT_Q)
    assert shape(result.tree) == [("0", ROOT_Q, [
        ("paris", 1, "kept", "not expanded: a chunk at this level answers the question"),
        ("eiffel", 2, "answers", None)])]
    assert [n.node.get_content() for n in result.evidence] == [DOCS["paris"], DOCS["eiffel"]]
    assert result.sub_evidence == []
    assert result.tree.stats.to_dict() == {"judge_calls": 2, "answer_calls": 0, "retrievals": 1, "sub_questions": 0,
                                           "malformed": 0, "llm_calls": 2,
                                           "judge_prompt_tokens": result.tree.stats.judge_prompt_tokens,
                                           "answer_prompt_tokens": 0}
    assert result.tree.stats.judge_prompt_tokens > 0 and llm.call_count == 2


def test_a_chunk_graded_one_is_enriched_with_the_answer_of_its_follow_up(retriever_k, judge_events_seen):
    llm = scripted({"paris": CITY_ONLY, "eiffel": ANSWERS})
    result = make_search(retriever_k(1), llm).search(ROOT_Q, message_id="msg-1")
    tree = result.tree
    assert shape(tree) == [("0", ROOT_Q, [("paris", 1, "enriched", None)]),
                           ("0.0", TOWER_Q, [("eiffel", 2, "answers", None)])]
    assert tree.root.chunks[0].child.answer == f"A({TOWER_Q})"
    assert [n.node.get_content() for n in result.evidence] == [
        f"{DOCS['paris']}\n\nFollow-up question: {TOWER_Q}\nAnswer: A({TOWER_Q})"]
    assert result.evidence[0].node.node_id == tree.root.chunks[0].node_id
    assert [n.node.get_content() for n in result.sub_evidence] == [DOCS["eiffel"]]
    assert (tree.status, tree.message_id) == ("complete", "msg-1")
    stats = tree.stats
    assert (stats.judge_calls, stats.answer_calls, stats.retrievals, stats.sub_questions) == (2, 1, 2, 1)
    assert stats.answer_prompt_tokens > 0
    # the sub-answer saw the sub-question's evidence
    assert DOCS["eiffel"] in llm.prompts[-1] and f"Query: {TOWER_Q}" in llm.prompts[-1]
    assert [type(e).__name__ for e in judge_events_seen] == [
        "JudgeChunkGradedEvent", "JudgeSubQuestionEvent", "JudgeChunkGradedEvent", "JudgeSubAnswerEvent",
        "JudgeSearchEndEvent"]
    graded, asked, graded_sub, answered, end = judge_events_seen
    assert isinstance(graded, JudgeChunkGradedEvent) and (graded.path, graded.grade, graded.follow_up) == (
        "0", 1, TOWER_Q)
    assert isinstance(asked, JudgeSubQuestionEvent) and (asked.path, asked.parent_path, asked.question,
                                                         asked.depth) == ("0.0", "0", TOWER_Q, 1)
    assert isinstance(graded_sub, JudgeChunkGradedEvent) and (graded_sub.path, graded_sub.grade) == ("0.0", 2)
    assert isinstance(answered, JudgeSubAnswerEvent) and (answered.path, answered.answer) == ("0.0", f"A({TOWER_Q})")
    assert isinstance(end, JudgeSearchEndEvent) and (end.status, end.stats["llm_calls"]) == ("complete", 3)
    assert {e.message_id for e in judge_events_seen} == {"msg-1"}


def test_zeros_are_dropped_and_chunks_graded_elsewhere_are_not_graded_again(retriever_k):
    llm = scripted({"paris": CITY_ONLY})
    result = make_search(retriever_k(3), llm).search(ROOT_Q)
    # the sub-question retrieves eiffel, paris, wall: the first two were graded at the root
    assert shape(result.tree) == [
        ("0", ROOT_Q, [("paris", 1, "kept", "sub-question found no evidence"), ("eiffel", 0, "dropped", None),
                       ("berlin", 0, "dropped", None)]),
        ("0.0", TOWER_Q, [("wall", 0, "dropped", None)])]
    sub = result.tree.root.chunks[0].child
    assert sub.seen == [result.tree.root.chunks[1].node_id, result.tree.root.chunks[0].node_id]
    assert [n.node.get_content() for n in result.evidence] == [DOCS["paris"]]
    assert len(judge_prompts(llm)) == 4 and llm.call_count == 4  # no sub-answer without evidence


def test_a_follow_up_repeating_an_ancestor_is_a_cycle(retriever_k):
    back_to_root = {"grade": 1, "reason": "loops", "follow_up": " when was the TOWER in the French capital built "}
    llm = scripted({"paris": CITY_ONLY, "eiffel": back_to_root})
    result = make_search(retriever_k(1), llm).search(ROOT_Q)
    assert shape(result.tree) == [("0", ROOT_Q, [("paris", 1, "enriched", None)]),
                                  ("0.0", TOWER_Q, [("eiffel", 1, "kept", "cycle: repeats the question at 0")])]
    assert result.tree.stats.sub_questions == 1


def test_a_judge_that_always_says_one_is_bounded_by_depth_branching_and_seen_chunks(retriever_k):
    llm = scripted({}, default=lambda question, key: {"grade": 1, "follow_up": f"What else is known about {key}?"})
    result = make_search(retriever_k(2), llm, max_depth=2, max_branching=1).search(ROOT_Q)
    tree = result.tree
    for node in tree.nodes():
        assert node.depth <= 2
        assert sum(c.child is not None for c in node.chunks) <= 1
    graded = [c.node_id for c in tree.chunks()]
    assert len(graded) == len(set(graded))  # nothing graded twice
    notes = {c.note for c in tree.chunks()}
    assert "not expanded: max_branching 1 reached" in notes
    assert "not expanded: max_depth 2 reached" in notes or any(c.note == "sub-question found no evidence"
                                                               for c in tree.chunks())
    assert tree.stats.llm_calls == len(judge_prompts(llm)) + tree.stats.answer_calls == llm.call_count


def test_max_depth_zero_only_grades_and_filters(retriever_k):
    llm = scripted({"paris": CITY_ONLY})
    result = make_search(retriever_k(2), llm, max_depth=0).search(ROOT_Q)
    assert shape(result.tree) == [("0", ROOT_Q, [("paris", 1, "kept", "not expanded: max_depth 0 reached"),
                                                 ("eiffel", 0, "dropped", None)])]


def test_max_branching_expands_the_highest_ranked_chunks_first(retriever_k):
    llm = scripted({"paris": CITY_ONLY, "eiffel": {"grade": 1, "follow_up": "Who designed it?"}})
    result = make_search(retriever_k(2), llm, max_branching=1, max_depth=1).search(ROOT_Q)
    root = result.tree.root
    assert [(c.doc_id, c.status, c.note) for c in root.chunks] == [
        ("paris", "kept", "sub-question found no evidence"),
        ("eiffel", "kept", "not expanded: max_branching 1 reached")]
    assert [c.child is not None for c in root.chunks] == [True, False]


def test_max_llm_calls_leaves_chunks_ungraded_and_stops_expanding(retriever_k):
    llm = scripted({"paris": CITY_ONLY})
    result = make_search(retriever_k(3), llm, max_llm_calls=2).search(ROOT_Q)
    assert shape(result.tree) == [("0", ROOT_Q, [
        ("paris", 1, "kept", "not expanded: max_llm_calls 2 reached"), ("eiffel", 0, "dropped", None),
        ("berlin", None, "ungraded", "not graded: max_llm_calls 2 reached")])]
    assert [n.node.get_content() for n in result.evidence] == [DOCS["paris"], DOCS["berlin"]]
    assert llm.call_count == 2


def test_malformed_and_out_of_range_grades_count_as_zero_and_the_search_goes_on(retriever_k):
    llm = scripted({"paris": "no idea", "eiffel": {"grade": 4}, "berlin": ANSWERS})
    result = make_search(retriever_k(3), llm).search(ROOT_Q)
    chunks = result.tree.root.chunks
    assert [(c.grade, c.status, c.error) for c in chunks] == [
        (0, "dropped", "reply has no 'grade': \"{'__unparsable__': 'no idea'}\""),
        (0, "dropped", "grade 4 is out of range; accepted: [0, 1, 2]"),
        (2, "answers", None)]
    assert result.tree.stats.malformed == 2


def test_given_nodes_are_graded_without_retrieving(retriever_k):
    nodes = [NodeWithScore(node=TextNode(text=DOCS["eiffel"], id_="x"), score=None)]
    result = make_search(retriever_k(2), scripted({"eiffel": ANSWERS})).search(ROOT_Q, nodes=nodes)
    assert shape(result.tree) == [("0", ROOT_Q, [("x", 2, "answers", None)])]
    assert result.tree.stats.retrievals == 0


async def test_async_search_builds_the_same_tree(retriever_k):
    rules = {"paris": CITY_ONLY, "eiffel": ANSWERS}
    sync = make_search(retriever_k(1), scripted(rules)).search(ROOT_Q)
    llm = scripted(rules)
    result = await make_search(retriever_k(1), llm).asearch(ROOT_Q)
    assert result.tree.to_dict() == sync.tree.to_dict()
    assert [n.node.get_content() for n in result.evidence] == [n.node.get_content() for n in sync.evidence]


def test_setting_cancel_stops_before_the_next_call_and_keeps_the_partial_tree(retriever_k, judge_events_seen):
    cancel = threading.Event()

    def grade(question, key):
        cancel.set()  # the user cancels while the first chunk is being graded
        return CITY_ONLY

    llm = scripted({"paris": grade})
    with pytest.raises(SearchCancelled, match="judge search cancelled after 0 LLM call") as info:
        make_search(retriever_k(3), llm).search(ROOT_Q, cancel=cancel, message_id="m")
    tree = info.value.tree
    assert llm.call_count == 1
    assert tree.status == "cancelled"
    assert [(c.doc_id, c.status, c.note) for c in tree.root.chunks] == [
        ("paris", "ungraded", "not graded: search cancelled"), ("eiffel", "ungraded", "not graded: search cancelled"),
        ("berlin", "ungraded", "not graded: search cancelled")]
    assert [(type(e).__name__, e.status) for e in judge_events_seen] == [("JudgeSearchEndEvent", "cancelled")]


def test_cancel_mid_tree_keeps_what_was_graded(retriever_k):
    cancel = threading.Event()

    def tower(question, key):
        cancel.set()
        return ANSWERS

    llm = scripted({"paris": CITY_ONLY, "eiffel": tower})
    with pytest.raises(SearchCancelled) as info:
        make_search(retriever_k(1), llm).search(ROOT_Q, cancel=cancel)
    # the grade in flight completes; the sub-answer is never asked for
    assert shape(info.value.tree) == [("0", ROOT_Q, [("paris", 1, "kept", None)]),
                                      ("0.0", TOWER_Q, [("eiffel", 2, "answers", None)])]
    assert llm.call_count == 2


async def test_cancelling_the_task_stops_the_async_search(retriever_k, judge_events_seen):
    holder = {}

    def grade(question, key):
        holder["task"].cancel()
        return CITY_ONLY

    llm = scripted({"paris": grade})
    holder["task"] = asyncio.ensure_future(make_search(retriever_k(3), llm).asearch(ROOT_Q))
    with pytest.raises(asyncio.CancelledError):
        await holder["task"]
    assert len(judge_prompts(llm)) <= 3 and not [p for p in llm.prompts if JUDGE_MARK not in p]
    assert [(type(e).__name__, e.status) for e in judge_events_seen][-1] == ("JudgeSearchEndEvent", "cancelled")


def test_llm_failures_propagate_and_mark_the_tree(retriever_k, judge_events_seen):
    llm = scripted({}, fail_on_call=0)
    with pytest.raises(ScriptedFailure):
        make_search(retriever_k(1), llm).search(ROOT_Q)
    assert [(type(e).__name__, e.status) for e in judge_events_seen] == [("JudgeSearchEndEvent", "error")]


def test_bad_arguments_are_rejected(retriever_k):
    llm = scripted({})
    with pytest.raises(ValueError, match="question must be a non-empty string, got ' '"):
        make_search(retriever_k(1), llm).search(" ")
    with pytest.raises(ValueError, match="the answerer of sub-questions must not stream"):
        TreeSearch(retriever=retriever_k(1), judge=LLMJudge(llm),
                   answerer=get_response_synthesizer(llm=llm, streaming=True))
    with pytest.raises(ValueError, match=r"missing \['answer'\]"):
        TreeSearch(retriever=retriever_k(1), judge=LLMJudge(llm), answerer=get_response_synthesizer(llm=llm),
                   enriched_template="{chunk} {question}")


def test_pure_helpers():
    assert normalize_question("  When WAS it\n built?? ") == "when was it built"
    nws = NodeWithScore(node=TextNode(text="Paris.", id_="p", metadata={"a": 1}), score=0.3)
    out = enrich(nws, "Q?", "A.")
    assert (out.node.node_id, out.node.metadata, out.score, out.node.get_content()) == (
        "p", {"a": 1}, 0.3, "Paris.\n\nFollow-up question: Q?\nAnswer: A.")
    assert nws.node.get_content() == "Paris."
