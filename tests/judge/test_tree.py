import json

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.judge import GradedChunk, SearchNode, SearchStats, SearchTree, Verdict


def sample_tree() -> SearchTree:
    root = SearchNode(question="When was the tower in the French capital built?", depth=0, path="0")
    city = GradedChunk(node_id="n1", doc_id="paris", score=0.6, preview="Paris is the capital of France.")
    city.apply(Verdict(1, "city only", "When was the Eiffel Tower built?"))
    city.status = "enriched"
    noise = GradedChunk(node_id="n2", doc_id="bm25", score=0.1, preview="BM25 is a ranking function.")
    noise.apply(Verdict.malformed("grade 9 is out of range; accepted: [0, 1, 2]"))
    child = SearchNode(question="When was the Eiffel Tower built?", depth=1, path="0.0", answer="In 1889.")
    tower = GradedChunk(node_id="n3", doc_id="eiffel", score=0.7, preview="The Eiffel Tower \"was\" built in 1889.")
    tower.apply(Verdict(2, "gives the year"))
    child.chunks, child.seen = [tower], ["n1"]
    city.child = child
    root.chunks = [city, noise]
    return SearchTree(root=root, limits={"max_depth": 2}, status="complete", message_id="m1",
                      stats=SearchStats(judge_calls=3, answer_calls=1, retrievals=1, sub_questions=1, malformed=1))


def test_json_round_trip_keeps_everything():
    tree = sample_tree()
    data = json.loads(tree.to_json())
    assert data["stats"]["llm_calls"] == 4
    assert data["root"]["chunks"][0]["child"]["chunks"][0]["grade"] == 2
    assert SearchTree.from_json(tree.to_json()) == tree


def test_walk_chunks_and_evidence():
    tree = sample_tree()
    assert [n.path for n in tree.nodes()] == ["0", "0.0"]
    assert [c.status for c in tree.chunks()] == ["enriched", "dropped", "answers"]
    assert tree.evidence_doc_ids() == ["paris", "eiffel"]
    assert tree.root.answered_here is False and tree.root.chunks[0].child.answered_here is True


def test_apply_maps_grades_to_statuses():
    chunk = GradedChunk.from_node(NodeWithScore(node=TextNode(text="x" * 400, id_="a"), score=0.5))
    assert (chunk.doc_id, len(chunk.preview), chunk.status) == ("a", 300, "pending")
    for grade, status in ((2, "answers"), (1, "kept"), (0, "dropped")):
        chunk.apply(Verdict(grade))
        assert chunk.status == status


def test_foreign_json_is_rejected_with_the_field_names():
    data = sample_tree().to_dict()
    data["root"]["colour"] = "red"
    with pytest.raises(ValueError, match=r"unknown SearchNode fields \['colour'\]; accepted: \['answer', "):
        SearchTree.from_dict(data)
    data = sample_tree().to_dict()
    data["status"] = "done"
    with pytest.raises(ValueError, match=r"status must be one of \['running', 'complete', 'cancelled', 'error'\]"):
        SearchTree.from_dict(data)
