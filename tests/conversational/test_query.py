"""ConversationalQuery: the plan travels with the query and the fusion decision comes back on it, so one retriever
serves concurrent conversations whose follow-ups expand to the same text."""

import asyncio
import dataclasses
import threading
from typing import Dict, List

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_convrag.conversational.contextualize import HistoryTurn, contextualize
from llama_index_convrag.conversational.query import ConversationalQuery, plan_of, record_fusion
from llama_index_convrag.conversational.retriever import ConversationalRetriever, fuse_lists

PLAN = contextualize("Is it treatable?", [HistoryTurn("What is throat cancer?")])
# the same expanded text, decided differently: the expansion weighs 2 in one conversation and 0.05 in the other
HEAVY, LIGHT = PLAN, dataclasses.replace(PLAN, context_weight=0.05)
OWN = [("generic", 3.0), ("throat-treat", 2.0), ("other", 1.0)]
CTX = [("throat-treat", 9.0), ("throat-what", 5.0), ("throat-more", 3.0), ("generic", 1.0)]


class GatedRetriever(BaseRetriever):
    """Fixed lists per query text; every search waits until ``parties`` searches are in flight at once."""

    def __init__(self, table: Dict[str, List[tuple]], parties: int) -> None:
        super().__init__()
        self.table = table
        self.gate = threading.Barrier(parties, timeout=30)

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        self.gate.wait()
        return [NodeWithScore(node=TextNode(id_=i, text=i), score=s) for i, s in self.table[query_bundle.query_str]]

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return [NodeWithScore(node=TextNode(id_=i, text=i), score=s) for i, s in self.table[query_bundle.query_str]]


def nodes(ranked: List[tuple]) -> List[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=i, text=i), score=s) for i, s in ranked]


def test_plan_of_and_record_fusion_read_and_write_only_a_conversational_query() -> None:
    query = ConversationalQuery(PLAN.query, plan=PLAN)
    assert plan_of(query) is PLAN and plan_of(QueryBundle(PLAN.query)) is None
    assert plan_of(ConversationalQuery("plain")) is None
    record_fusion(query, {"context": 1.0})
    assert query.fusion == {"context": 1.0}
    plain = QueryBundle("plain")
    record_fusion(plain, {"context": 1.0})  # nowhere to keep it: ignored
    assert not hasattr(plain, "fusion")
    assert isinstance(query, QueryBundle) and query.query_str == PLAN.query and query.embedding_strs == [PLAN.query]


def test_two_conversations_with_the_same_expanded_text_fuse_with_their_own_plans_at_once() -> None:
    assert HEAVY.query == LIGHT.query and HEAVY.context_weight != LIGHT.context_weight
    # both conversations are inside the retriever together: each search waits for the other conversation's
    shared = ConversationalRetriever(GatedRetriever({PLAN.question: OWN, PLAN.query: CTX}, parties=2))
    queries = {"heavy": ConversationalQuery(HEAVY.query, plan=HEAVY), "light": ConversationalQuery(LIGHT.query,
                                                                                                   plan=LIGHT)}
    got: Dict[str, List[str]] = {}

    def turn(name: str) -> None:
        got[name] = [n.node.node_id for n in shared.retrieve(queries[name])]

    threads = [threading.Thread(target=turn, args=(name,)) for name in queries]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for name, plan in (("heavy", HEAVY), ("light", LIGHT)):
        alone, decision = fuse_lists(nodes(OWN), nodes(CTX), plan, 4)
        assert got[name] == [n.node.node_id for n in alone]
        assert queries[name].fusion == decision
    assert queries["heavy"].fusion["context"] > queries["light"].fusion["context"]
    assert got["heavy"][0] == "throat-treat" and got["light"][0] == "generic"  # the decisions really differ


async def test_async_twins_keep_their_own_plans_under_gather() -> None:
    shared = ConversationalRetriever(GatedRetriever({PLAN.question: OWN, PLAN.query: CTX}, parties=1))
    heavy, light = ConversationalQuery(HEAVY.query, plan=HEAVY), ConversationalQuery(LIGHT.query, plan=LIGHT)
    first, second = await asyncio.gather(shared.aretrieve(heavy), shared.aretrieve(light))
    assert [n.node.node_id for n in first][0] == "throat-treat" and [n.node.node_id for n in second][0] == "generic"
    assert heavy.fusion == fuse_lists(nodes(OWN), nodes(CTX), HEAVY, 4)[1]
    assert light.fusion == fuse_lists(nodes(OWN), nodes(CTX), LIGHT, 4)[1]
