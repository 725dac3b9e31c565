"""Turn: one turn's state and steps over a turn the port loaded from a real SQLite store; the pure helpers on
hand-built inputs."""

from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.base.response.schema import Response, StreamingResponse
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.chat.budget import TrimReport
from llama_index_convrag.chat.port import StoreTurnPort, TurnRequest
from llama_index_convrag.conversational.rewrite import RewriteResult
from llama_index_convrag.chat.turn import (Turn, aread_text, build_citations, final_doc_id, group_turns, read_text,
                                           stage_names)


def node(key: str, score: float, ref: Any = None) -> NodeWithScore:
    text = TextNode(id_=key, text=f"text of {key}")
    if ref is not None:
        from llama_index.core.schema import NodeRelationship, RelatedNodeInfo

        text.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=ref)
    return NodeWithScore(node=text, score=score)


def seed(store: Any, *pairs: str) -> None:
    for i, text in enumerate(pairs):
        store.add_message_text("c", "user" if i % 2 == 0 else "assistant", text)


def start(store: Any, question: str, window: Any = None, streaming: bool = False) -> Turn:
    return Turn.start(StoreTurnPort(store).load(TurnRequest("c", question, window=window, streaming=streaming)))


def test_start_opens_the_record_of_the_loaded_turn(store: Any) -> None:
    seed(store, "q1", "a1", "q2", "a2", "q3", "a3")
    turn = start(store, "q4", window=2, streaming=True)
    assert [m.content for m in turn.history] == ["q2", "a2", "q3", "a3"]
    *_, user, placeholder = store.get_conversation("c")
    rec = turn.record
    assert (rec.user_message_id, rec.assistant_message_id, rec.streaming, rec.original_question) == (
        user.id, placeholder.id, True, "q4")


def test_rewrite_stages_trim_and_finish(store: Any) -> None:
    port = StoreTurnPort(store)
    turn = Turn.start(port.load(TurnRequest("c", "And it?", window=3)))
    assert turn.retrieval_query == "And it?"
    turn.apply_rewrite(RewriteResult("What is Milvus?", "llm", used_llm=True, latency_ms=3.0, cache_hit=False))
    assert (turn.retrieval_query, turn.record.rewrite_strategy, turn.record.rewrite_used_llm) == (
        "What is Milvus?", "llm", True)
    turn.apply_stages({"retrieve": [node("a", 0.9, ref="doc-a"), node("b", 0.5)], "SimilarityPostprocessor": [
        node("a", 0.9, ref="doc-a"), node("b", 0.5)]})
    assert turn.record.retrieved_ids == {"retrieve": ["a", "b"], "SimilarityPostprocessor": ["a", "b"]}
    report = TrimReport(budget=10, context_window=20, reserved_output=5, budget_ratio=0.95, tokens={},
                        kept_chunks=[1])
    turn.apply_trim(report)
    assert [n.node.node_id for n in turn.nodes] == ["b"]
    assert (turn.record.retrieved_ids["budget"], turn.record.retrieved_ids["final"]) == (["b"], ["b"])
    outcome = turn.outcome("complete", "Milvus stores vectors.", None, Response("Milvus stores vectors."))
    assert (outcome.content, outcome.status, [c.node_id for c in outcome.citations]) == (
        "Milvus stores vectors.", "complete", ["b"])
    port.commit(outcome)
    assistant = store.get_conversation("c")[-1]
    assert (assistant.content, assistant.status) == ("Milvus stores vectors.", "complete")
    assert [c.node_id for c in store.get_citations(assistant.id)] == ["b"]
    saved = store.get_turn_record(assistant.id)
    assert saved["answer"] == "Milvus stores vectors." and saved["trim_report"]["kept_chunks"] == [1]
    meta = turn.metadata(generated_question=True)
    assert meta["generated_question"] == "What is Milvus?" and meta["trim_report"] is report


def test_a_failed_outcome_records_the_error(store: Any) -> None:
    turn = start(store, "q")
    StoreTurnPort(store).commit(turn.outcome("error", "", RuntimeError("boom"), None))
    assistant = store.get_conversation("c")[-1]
    assert (assistant.status, assistant.error) == ("error", "RuntimeError: boom")
    assert turn.record.error == "RuntimeError: boom" and turn.record.citations == []


def test_pure_helpers() -> None:
    assert final_doc_id(node("n1", 1.0, ref="d1")) == "d1" and final_doc_id(node("n2", 1.0)) == "n2"
    pp = SimilarityPostprocessor(similarity_cutoff=0.1)
    assert [n for n, _ in stage_names([pp, pp])] == ["SimilarityPostprocessor", "SimilarityPostprocessor#2"]
    msgs = [ChatMessage(role="system", content="s"), ChatMessage(role="user", content="q1"),
            ChatMessage(role="assistant", content="a1"), ChatMessage(role="user", content="q2")]
    assert [[m.content for m in t] for t in group_turns(msgs)] == [["s"], ["q1", "a1"], ["q2"]]
    assert read_text(StreamingResponse(response_gen=iter(["a", "b"]))) == "ab" and read_text(Response("x")) == "x"


async def test_aread_text_of_sync_streams() -> None:
    assert await aread_text(StreamingResponse(response_gen=iter(["a", "b"]))) == "ab"


def test_citations_from_metadata_or_every_source() -> None:
    nodes = [node("a", 0.9), node("b", 0.4)]
    cited = Response("b [1]", source_nodes=nodes, metadata={"citations": [{"source_index": 1, "marker": 1},
                                                                         {"source_index": 7, "marker": 2}]})
    assert [(c.node_id, c.marker, c.source_index) for c in build_citations(cited, nodes)] == [("b", 1, 1)]
    plain = build_citations(Response("x"), nodes)
    assert [(c.node_id, c.marker, c.score) for c in plain] == [("a", None, 0.9), ("b", None, 0.4)]
