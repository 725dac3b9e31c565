"""Turn: one turn's state and steps against a real SQLite store; the pure helpers on hand-built inputs."""

from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.base.response.schema import Response, StreamingResponse
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.chat.budget import TrimReport
from llama_index_convrag.conversational.rewrite import RewriteResult
from llama_index_convrag.conversational.rewrite import select_history
from llama_index_convrag.chat.turn import (Turn, aread_text, build_citations, final_doc_id, group_turns, read_text,
                                           recent_history, stage_names)


def node(key: str, score: float, ref: Any = None) -> NodeWithScore:
    text = TextNode(id_=key, text=f"text of {key}")
    if ref is not None:
        from llama_index.core.schema import NodeRelationship, RelatedNodeInfo

        text.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=ref)
    return NodeWithScore(node=text, score=score)


def seed(store: Any, *pairs: str) -> None:
    for i, text in enumerate(pairs):
        store.add_message_text("c", "user" if i % 2 == 0 else "assistant", text)


def test_recent_history_cuts_the_window_as_select_history_does(store: Any) -> None:
    """Read backwards from the newest message, the window is the one select_history cuts from the whole history:
    leading system text, failed, pending and empty cancelled answers skipped, fewer user turns than the window."""
    for cid in ("c", "other"):
        store.add_message_text(cid, "system", "be brief")
    store.add_message_text("c", "assistant", "hello")
    for i in range(6):
        store.add_message_text("c", "user", f"q{i}")
        status = ["complete", "error", "cancelled", "pending"][i % 4]
        store.add_message_text("c", "assistant", f"a{i}" if i != 2 else "", status=status)
    store.add_message_text("c", "user", "last, unanswered")
    for cid in ("c", "other"):
        full = store.history(cid)
        for window in range(0, 10):
            expected = [full[i] for i in select_history(full, window)]  # type: ignore[arg-type]
            assert recent_history(store, cid, window) == expected, (cid, window)
    assert [m.content for m in recent_history(store, "c", 3)] == ["q4", "a4", "q5", "last, unanswered"]


def test_begin_reads_the_window_then_stores_user_and_placeholder(store: Any) -> None:
    seed(store, "q1", "a1", "q2", "a2", "q3", "a3")
    turn = Turn.begin(store, "c", "q4", chat_history=None, window=2, streaming=True)
    assert [m.content for m in turn.history] == ["q2", "a2", "q3", "a3"]
    assert turn.history_ids == [m.id for m in store.get_conversation("c")[2:6]]
    *_, user, placeholder = store.get_conversation("c")
    assert (user.content, placeholder.status, placeholder.content) == ("q4", "pending", "")
    rec = turn.record
    assert (rec.user_message_id, rec.assistant_message_id, rec.streaming) == (user.id, placeholder.id, True)
    assert Turn.begin(store, "c", "q5", chat_history=None, window=None, streaming=False).history[0].content == "q1"
    explicit = Turn.begin(store, "c", "q6", chat_history=[], window=2, streaming=False)
    assert (explicit.history, explicit.history_ids) == ([], None)


def test_rewrite_stages_trim_and_finish(store: Any) -> None:
    turn = Turn.begin(store, "c", "And it?", chat_history=None, window=3, streaming=False)
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
    turn.finish(store, "complete", "Milvus stores vectors.", None, Response("Milvus stores vectors."))
    assistant = store.get_conversation("c")[-1]
    assert (assistant.content, assistant.status) == ("Milvus stores vectors.", "complete")
    assert [c.node_id for c in store.get_citations(assistant.id)] == ["b"]
    saved = store.get_turn_record(assistant.id)
    assert saved["answer"] == "Milvus stores vectors." and saved["trim_report"]["kept_chunks"] == [1]
    meta = turn.metadata(generated_question=True)
    assert meta["generated_question"] == "What is Milvus?" and meta["trim_report"] is report


def test_failed_finish_records_the_error(store: Any) -> None:
    turn = Turn.begin(store, "c", "q", chat_history=None, window=None, streaming=False)
    turn.finish(store, "error", "", RuntimeError("boom"), None)
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
