"""Concurrent conversations in one process share one set of engine parts (rewriter, fusing retriever, synthesizer):
follow-ups that expand to the same retrieval text still keep their own plan and fusion decision in their records."""

import asyncio
import threading
from typing import Any, Dict, List, Optional

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine
from llama_index_convrag.conversational.contextualize import HistoryTurn, contextualize
from llama_index_convrag.conversational.retriever import ConversationalRetriever
from llama_index_convrag.storage.conversation import SQLiteConversationStore

PASSAGES = ["Inception runs 148 minutes.", "Christopher Nolan directed Inception.", "Paris is in France."]
FOLLOW_UP = "Is it long?"
ANSWER = "You asked about Inception."
HISTORIES = {"A": [HistoryTurn("Who directed Inception?", ANSWER)],
             "B": [HistoryTurn("Who directed Inception?", ANSWER), HistoryTurn("Who directed Inception?", ANSWER)]}


class GatedRetriever(BaseRetriever):
    """The same passages for every query; while ``gate`` is set, each search waits for the other conversation's."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: Optional[threading.Barrier] = None

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        if self.gate is not None:
            self.gate.wait()
        return [NodeWithScore(node=TextNode(id_=f"p{i}", text=t), score=1.0 - i / 10) for i, t in enumerate(PASSAGES)]


def engines(tmp_path: Any, embed_model: Any) -> Dict[str, ConvRAGChatEngine]:
    store = SQLiteConversationStore(str(tmp_path / "conversations.db"))
    first = ConvRAGChatEngine.from_defaults(GatedRetriever(), None, answer=AnswerOptions(embed_model=embed_model),
                                            conversation_store=store, conversation_id="A")
    made = {"A": first, "B": first.for_conversation("B")}
    for cid, turns in HISTORIES.items():  # earlier turns, as stored
        for turn in turns:
            store.add_message(cid, ChatMessage(role="user", content=turn.question))
            store.add_message(cid, ChatMessage(role="assistant", content=turn.answer))
    return made


def expected(cid: str) -> Dict[str, Any]:
    return contextualize(FOLLOW_UP, HISTORIES[cid]).explain()


def check_records(records: Dict[str, Any]) -> None:
    assert records["A"].retrieval_query == records["B"].retrieval_query == "Is it long? directed Inception"
    for cid, record in records.items():
        assert record.conversation_id == cid
        explanation = dict(record.rewrite_explanation)
        fusion = explanation.pop("fusion")
        assert explanation == expected(cid)  # its own plan, not the other conversation's
        assert fusion["question"] == 1.0 and fusion["context"] > 0 and fusion["own_top_kept"] is False
    assert expected("A")["added_terms"] != expected("B")["added_terms"]  # the two plans differ


def test_for_conversation_shares_every_part_and_checks_the_id(tmp_path: Any, embed_model: Any) -> None:
    made = engines(tmp_path, embed_model)
    a, b = made["A"], made["B"]
    assert (a.conversation_id, b.conversation_id) == ("A", "B")
    assert b._retriever is a._retriever and b._rewriter is a._rewriter and b._synthesizer is a._synthesizer
    assert isinstance(a._retriever, ConversationalRetriever) and b.store is a.store
    assert [m.content for m in b.chat_history if m.role.value == "user"] == ["Who directed Inception?"] * 2
    with pytest.raises(ValueError, match="conversation_id must be a non-empty string, got ''"):
        a.for_conversation("")


def test_two_threads_same_expanded_query_each_record_holds_its_own_plan_and_fusion(tmp_path: Any,
                                                                                   embed_model: Any) -> None:
    made = engines(tmp_path, embed_model)
    # both follow-ups are rewritten before either searches: each search waits for the other conversation's
    made["A"]._retriever.retriever.gate = threading.Barrier(2, timeout=30)
    records: Dict[str, Any] = {}

    def turn(cid: str) -> None:
        records[cid] = made[cid].chat(FOLLOW_UP).metadata["turn"]

    threads = [threading.Thread(target=turn, args=(cid,)) for cid in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    check_records(records)
    stored = {cid: made[cid].store.get_turn_record(records[cid].assistant_message_id) for cid in made}
    assert {cid: r["rewrite_explanation"] for cid, r in stored.items()} == \
        {cid: records[cid].rewrite_explanation for cid in made}  # persisted as it was decided


async def test_two_tasks_same_expanded_query_each_record_holds_its_own_plan_and_fusion(tmp_path: Any,
                                                                                       embed_model: Any) -> None:
    made = engines(tmp_path, embed_model)
    responses = await asyncio.gather(*(made[cid].achat(FOLLOW_UP) for cid in made))
    check_records({cid: r.metadata["turn"] for cid, r in zip(made, responses)})
