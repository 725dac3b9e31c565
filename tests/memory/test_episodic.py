"""EpisodicMemory against real Milvus Lite and the local model: what is indexed, what a recall returns and leaves out,
owners and conversations kept apart, deletion, and the async twins."""

from __future__ import annotations

from typing import Any, Iterator, List

import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import QueryBundle

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.episodic import EpisodicMemory, unit_texts
from llama_index_convrag.memory.rules import RecallRules
from llama_index_convrag.memory.units import MemoryUnit

TALK = [
    ("user", "Hey! I finally booked the trip to Lisbon for October."),
    ("assistant", "Great choice. Lisbon in October is warm and less crowded."),
    ("user", "What should I pack for the rain?"),
    ("assistant", "A light waterproof jacket and shoes with grip for the hills."),
    ("user", "My sister Ana is coming too, she is allergic to peanuts."),
    ("assistant", "Tell restaurants about the peanut allergy; ask for the ingredient list."),
    ("user", "Which museum do you recommend?"),
    ("assistant", "The tile museum, Museu Nacional do Azulejo."),
    ("user", "And how do we get from the airport?"),
    ("assistant", "The metro red line goes from the airport to the centre."),
]


def units(owner: str = "alice", conversation: str = "c1", talk: List[Any] = TALK) -> List[MemoryUnit]:
    return [MemoryUnit(owner=owner, conversation_id=conversation, position=i, message_id=f"{conversation}-m{i}",
                       speaker=role, text=text, turn=i // 2, time=1_700_000_000.0 + i, session="1")
            for i, (role, text) in enumerate(talk)]


@pytest.fixture
def memory(milvus_client: Any, milvus_target: Any, embed_model: Any, collection_name: str) -> EpisodicMemory:
    return EpisodicMemory.from_defaults(embed_model=embed_model, client=milvus_client, target=milvus_target,
                                        collection_name=collection_name)


#: Two people who both talk about hiking: a question that names one of them is about that one's messages.
PAIR = [
    ("Ana", "I went hiking in the Gerês mountains last weekend."),
    ("Rui", "Nice! I prefer cycling, but I hiked the Rota Vicentina trail once."),
    ("Ana", "Hiking the coast trail is on my list for spring."),
    ("Rui", "My knee hurts after long hikes, so I keep them short."),
    ("Ana", "Did you watch the match on Sunday?"),
    ("Rui", "Yes, what a game."),
]


@pytest.fixture(scope="module")
def indexed(milvus_client: Any, milvus_target: Any, embed_model: Any) -> Iterator[EpisodicMemory]:
    """One collection holding TALK as alice's conversation c1 and PAIR as her conversation pair, shared by the tests
    that only read it."""
    name = "memory_episodic_shared"
    memory = EpisodicMemory.from_defaults(embed_model=embed_model, client=milvus_client, target=milvus_target,
                                          collection_name=name)
    memory.index(units())
    memory.index(units(conversation="pair", talk=PAIR))
    yield memory
    milvus_client.drop_collection(name)


def test_nothing_indexed_recalls_nothing_and_creates_nothing(memory: EpisodicMemory, milvus_client: Any) -> None:
    got = memory.recall("peanut allergy", owner="alice", conversation_id="c1", k=3)
    assert got.units == [] and got.k == 3
    assert not milvus_client.has_collection(memory.collection_name)
    assert memory.count("alice", "c1") == 0


async def test_a_created_collection_without_the_conversation_recalls_nothing_without_a_search(
        memory: EpisodicMemory, milvus_client: Any) -> None:
    """A collection the writer has created but not filled (the first turns of a memory): Milvus Lite fails a BM25
    search of an empty collection ("NaN or Inf"), so the recall must be empty without one, sync and async."""
    memory.ensure_collection()
    assert milvus_client.has_collection(memory.collection_name)
    assert memory.recall("peanut allergy", owner="alice", conversation_id="c1", k=3).units == []
    assert (await memory.arecall("peanut allergy", owner="alice", conversation_id="c1", k=3)).units == []


def test_recall_finds_the_earlier_message_with_its_reasons(indexed: EpisodicMemory) -> None:
    assert indexed.count("alice", "c1") == len(TALK)
    got = indexed.recall("Who is allergic to peanuts?", owner="alice", conversation_id="c1", k=3)
    assert set(got.positions[:2]) == {4, 5}  # the message and the reply that names the allergy again
    said = next(u for u in got.units if u.position == 4)
    assert said.message_id == "c1-m4" and said.speaker == "user"
    assert said.text == TALK[4][1] and said.turn == 2 and said.date == "14 November 2023"
    searches = {f["search"] for f in said.found_by}
    assert {"dense:own", "sparse:own", "dense:context", "sparse:context", "fusion:weighted"} <= searches
    reply = next(u for u in got.units if u.position == 5)
    assert reply.spread_from == [4, 6, 3] and reply.score > said.score * 0.5
    assert "[#4 (14 November 2023)] user: My sister Ana is coming too" in got.block_text()
    assert got.latency_ms > 0


def reader(indexed: EpisodicMemory, rules: RecallRules) -> EpisodicMemory:
    """Another memory over ``indexed``'s collection, with ``rules``."""
    return EpisodicMemory.from_defaults(embed_model=indexed._embed_model, client=indexed._client,
                                        target=indexed.target, collection_name=indexed.collection_name, rules=rules)


def test_a_query_that_names_a_speaker_raises_that_speakers_messages(indexed: EpisodicMemory) -> None:
    plain = reader(indexed, RecallRules(speaker_boost=0.0, bridge_boost=0.0))
    speaker = reader(indexed, RecallRules(bridge_boost=0.0))
    query = "Which hikes did Rui do?"
    before = plain.recall(query, owner="alice", conversation_id="pair", k=6)
    got = speaker.recall(query, owner="alice", conversation_id="pair", k=6)
    assert sorted(got.positions) == sorted(before.positions)  # the same messages, scored again
    unboosted = {u.position: u.score for u in before.units}
    for u in got.units:
        assert u.speaker_named == (u.speaker == "Rui")
        factor = 1.0 + indexed.rules.speaker_boost if u.speaker_named else 1.0
        assert u.score == pytest.approx(unboosted[u.position] * factor, abs=1e-5)
    assert [u.score for u in got.units] == sorted((u.score for u in got.units), reverse=True)
    assert got.units[0].speaker == "Rui"
    # no name, or both names: the step changes nothing
    for q in ("Which hikes were done?", "Which hikes did Ana and Rui do?"):
        assert speaker.recall(q, owner="alice", conversation_id="pair", k=6).to_record()["units"] == [
            dict(u, speaker_named=False) for u in plain.recall(q, owner="alice", conversation_id="pair",
                                                              k=6).to_record()["units"]]


#: A question that names a kind ("pets") and messages that name instances of it.
PETS = [
    ("Ana", "We adopted a dog from the shelter last spring."),
    ("Rui", "That is lovely, how is the training going?"),
    ("Ana", "Slowly! We also have a cat, and she ignores the dog."),
    ("Rui", "I went hiking in the mountains on Sunday."),
    ("Ana", "Which trail did you take?"),
    ("Rui", "The coastal one, about twelve kilometres."),
]


def test_a_message_that_names_an_instance_of_the_querys_kind_is_raised(indexed: EpisodicMemory) -> None:
    indexed.index(units(conversation="pets", talk=PETS))
    plain = reader(indexed, RecallRules(bridge_boost=0.0))
    query = "Which pets does Ana have?"
    unbridged = plain.recall(query, owner="alice", conversation_id="pets", k=6)
    before = {u.position: u for u in unbridged.units}
    got = indexed.recall(query, owner="alice", conversation_id="pets", k=6)
    assert sorted(got.positions) == sorted(before)  # the same candidates, scored again
    shares = {u.position: u.bridged for u in got.units}
    assert shares[0] == shares[2] == 1.0  # "dog", "cat" lie near "pets" (the query's one content word)
    assert shares[3] == shares[5] == 0.0
    for u in got.units:
        assert before[u.position].bridged == 0.0
        assert u.score == pytest.approx(before[u.position].score + indexed.rules.bridge_boost * u.bridged, abs=1e-5)
    for p in (0, 2):  # raised past the messages they did not bridge
        assert got.positions.index(p) < unbridged.positions.index(p) or got.positions.index(p) == 0
    # a query without a content word (stop words and names only): the step changes nothing
    assert indexed.recall("What did Ana do?", owner="alice", conversation_id="pets", k=6).to_record()["units"] == \
        plain.recall("What did Ana do?", owner="alice", conversation_id="pets", k=6).to_record()["units"]


def test_the_recent_window_is_left_out(indexed: EpisodicMemory) -> None:
    got = indexed.recall("Which museum do you recommend?", owner="alice", conversation_id="c1", before=6, k=10)
    assert got.positions and max(got.positions) < 6
    assert got.before == 6
    with pytest.raises(ConfigurationError, match=r"before must be None or an int >= 0 .*got -1"):
        indexed.recall("x", owner="alice", conversation_id="c1", before=-1)


def test_owners_and_conversations_never_mix(memory: EpisodicMemory) -> None:
    memory.index(units())
    memory.index(units(owner="bob", talk=[("user", "I have a peanut allergy myself.")]))
    memory.index(units(conversation="c2", talk=[("user", "Peanut butter recipes please.")]))
    got = memory.recall("peanut", owner="bob", conversation_id="c1", k=5)
    assert [(u.message_id, u.text) for u in got.units] == [("c1-m0", "I have a peanut allergy myself.")]
    mine = memory.recall("peanut", owner="alice", conversation_id="c1", k=10)
    assert all(u.message_id.startswith("c1-") for u in mine.units)
    assert "I have a peanut allergy myself." not in [u.text for u in mine.units]
    assert memory.recall("peanut", owner="carol", conversation_id="c1", k=5).units == []
    memory.delete_conversation("bob", "c1")
    assert memory.count("bob", "c1") == 0 and memory.count("alice", "c1") == len(TALK)
    assert memory.count("alice", "c2") == 1


def test_indexing_again_replaces_and_context_comes_from_before(memory: EpisodicMemory) -> None:
    first, rest = units()[:5], units()[5:]
    memory.index(first)
    memory.index(rest, context=first)
    assert memory.count("alice", "c1") == len(TALK)
    memory.index(units()[5:6], context=first)
    assert memory.count("alice", "c1") == len(TALK)
    [(_, own, ctx)] = unit_texts(units()[5:6], first, RecallRules())
    assert ctx == f"{own.splitlines()[0]}\nuser: {TALK[4][1]}\nassistant: {TALK[5][1]}"
    assert unit_texts(units()[5:6], first, RecallRules(context_before=0))[0][2] == own


def test_bad_scope_is_refused(memory: EpisodicMemory) -> None:
    with pytest.raises(ConfigurationError, match="owner must be a non-empty string, got ''"):
        memory.recall("x", owner="", conversation_id="c1")
    with pytest.raises(ConfigurationError, match="conversation_id must be a non-empty string, got None"):
        memory.delete_conversation("alice", None)  # type: ignore[arg-type]


class CountingClient:
    """The real Milvus client, counting the count queries it is sent."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.counts = 0

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self.counts += kwargs.get("output_fields") == ["count(*)"]
        return self._inner.query(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_a_conversation_known_to_hold_messages_is_recalled_without_a_count_query(
        milvus_client: Any, milvus_target: Any, embed_model: Any, collection_name: str) -> None:
    client = CountingClient(milvus_client)
    writer = EpisodicMemory.from_defaults(embed_model=embed_model, client=client, target=milvus_target,
                                          collection_name=collection_name)
    writer.index(units())
    assert writer.recall("peanut", owner="alice", conversation_id="c1", k=2).units
    assert (await writer.arecall("peanut", owner="alice", conversation_id="c1", k=2)).units
    assert client.counts == 0  # it indexed the conversation itself
    reader = EpisodicMemory.from_defaults(embed_model=embed_model, client=client, target=milvus_target,
                                          collection_name=collection_name)
    for _ in range(3):
        assert reader.recall("peanut", owner="alice", conversation_id="c1", k=2).units
    assert client.counts == 1  # another process indexed it: one count, then known
    assert reader.recall("peanut", owner="bob", conversation_id="c1", k=2).units == []
    assert reader.recall("peanut", owner="bob", conversation_id="c1", k=2).units == []
    assert client.counts == 3  # a conversation without messages is asked again (its first turn may come)
    reader.delete_conversation("alice", "c1")
    assert reader.recall("peanut", owner="alice", conversation_id="c1", k=2).units == []
    assert client.counts == 4


async def test_async_twins_match_sync(memory: EpisodicMemory) -> None:
    assert await memory.aindex(units()) == len(TALK)
    sync = memory.recall("What should I pack for rain?", owner="alice", conversation_id="c1", before=8, k=4)
    got = await memory.arecall("What should I pack for rain?", owner="alice", conversation_id="c1", before=8, k=4)
    assert got.positions == sync.positions
    assert [u.score for u in got.units] == [u.score for u in sync.units]
    await memory.adelete_conversation("alice", "c1")
    assert memory.count("alice", "c1") == 0


class Counting(BaseEmbedding):
    """The local model, counting query embeddings (the retriever embeds a query once per model, not per field)."""

    _inner: Any = PrivateAttr()
    _queries: int = PrivateAttr(default=0)

    def __init__(self, inner: Any) -> None:
        super().__init__(model_name="counting")
        self._inner = inner

    @property
    def dimension(self) -> int:
        return 384

    def _get_query_embedding(self, query: str) -> List[float]:
        self._queries += 1
        return self._inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._inner.get_text_embedding(text)


def test_the_query_is_embedded_once_and_a_given_vector_is_used(milvus_client: Any, milvus_target: Any,
                                                              embed_model: Any, indexed: EpisodicMemory) -> None:
    counting = Counting(embed_model)
    memory = EpisodicMemory.from_defaults(embed_model=counting, client=milvus_client, target=milvus_target,
                                          collection_name=indexed.collection_name)
    memory.recall("museum", owner="alice", conversation_id="c1", k=2)
    assert counting._queries == 1  # two dense fields, one model: one embedding
    vector = embed_model.get_query_embedding("museum")
    got = memory.recall(QueryBundle("museum", embedding=vector), owner="alice", conversation_id="c1", k=2)
    assert counting._queries == 1 and got.positions


def test_index_turn_indexes_the_committed_turn_from_the_stores_messages(memory: EpisodicMemory) -> None:
    from llama_index_convrag.storage.conversation.base import Message

    history = [Message(id=f"m{i}", conversation_id="c9", role=role, content=text, created_at=1_700_000_000.0)
               for i, (role, text) in enumerate(TALK[:6])]
    assert memory.index_turn("alice", "c9", history[:4], new=4) == 4
    assert memory.index_turn("alice", "c9", history, new=2) == 2
    got = memory.recall("peanut allergy", owner="alice", conversation_id="c9", k=2)
    assert {(u.position, u.message_id, u.speaker, u.turn) for u in got.units} >= {(5, "m5", "assistant", 2)}
    with pytest.raises(ConfigurationError, match="new must be an int >= 0 .*got -1"):
        memory.index_turn("alice", "c9", history, new=-1)


class CallLog:
    """The real Milvus client, logging the methods called on it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: List[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def logged(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return method(*args, **kwargs)
        return logged


def test_a_recall_is_two_searches_then_one_get_of_the_candidates_not_cached(
        indexed: EpisodicMemory, milvus_client: Any, milvus_target: Any, embed_model: Any) -> None:
    log = CallLog(milvus_client)
    memory = EpisodicMemory(client=log, embed_model=embed_model, dim=384, collection_name=indexed.collection_name,
                            target=milvus_target)  # type: ignore[arg-type]
    memory.recall("peanut", owner="alice", conversation_id="c1", k=3)  # first: the layout, the count, the get
    log.calls.clear()
    got = memory.recall("Who is allergic to peanuts?", owner="alice", conversation_id="c1", k=3)
    assert log.calls[:2] == ["search", "search"] and got.units[0].text and got.units[0].message_id
    log.calls.clear()
    again = memory.recall("Who is allergic to peanuts?", owner="alice", conversation_id="c1", k=3)
    assert log.calls == ["search", "search"]  # every candidate read before: no get
    uncached = EpisodicMemory(client=log, embed_model=embed_model, dim=384, collection_name=indexed.collection_name,
                              target=milvus_target, cached_rows=0)  # type: ignore[arg-type]
    uncached.recall("peanut", owner="alice", conversation_id="c1", k=3)
    log.calls.clear()
    fresh = uncached.recall("Who is allergic to peanuts?", owner="alice", conversation_id="c1", k=3)
    assert log.calls == ["search", "search", "get"]
    expected = indexed.recall("Who is allergic to peanuts?", owner="alice", conversation_id="c1", k=3).to_record()
    for recall in (got, again, fresh):
        assert recall.to_record() == expected | {"latency_ms": recall.to_record()["latency_ms"]}


async def test_a_memory_recalls_what_it_wrote_without_a_get_and_never_a_deleted_message(
        milvus_client: Any, milvus_target: Any, embed_model: Any, collection_name: str) -> None:
    from llama_index_convrag.storage.conversation.base import Message

    log = CallLog(milvus_client)
    memory = EpisodicMemory(client=log, embed_model=embed_model, dim=384, collection_name=collection_name,
                            target=milvus_target)  # type: ignore[arg-type]
    history = [Message(id=f"m{i}", conversation_id="c1", role=role, content=text, created_at=1_700_000_000.0)
               for i, (role, text) in enumerate(TALK)]
    memory.index_positions("alice", "c1", history, range(len(TALK)))
    log.calls.clear()
    ask = {"owner": "alice", "conversation_id": "c1", "before": len(TALK), "k": 10}  # as a turn: every row exists
    got = memory.recall("Tell restaurants about the peanut allergy", **ask)
    assert log.calls == ["search", "search"] and 5 in got.positions and 4 in got.positions
    history[5] = Message(id="m5", conversation_id="c1", role="assistant", content=TALK[5][1], status="error",
                         created_at=1_700_000_000.0)  # the answer failed: it leaves the history
    assert memory.index_positions("alice", "c1", history, [5]) == (0, 1)
    for recall in (memory.recall("Tell restaurants about the peanut allergy", **ask),
                   await memory.arecall("Tell restaurants about the peanut allergy", **ask)):
        assert 5 not in recall.positions and 4 in recall.positions  # 5 spreads from 4 no more: its row is gone
    memory.delete_conversation("alice", "c1")
    memory.index(units()[:2])
    log.calls.clear()
    assert memory.recall("Lisbon trip", owner="alice", conversation_id="c1", before=2, k=10).positions == [0, 1]
    assert log.calls == ["search", "search"]  # the rows written after the delete are cached again
    log.calls.clear()
    assert memory.recall("Lisbon trip", owner="alice", conversation_id="c1", k=10).positions == [0, 1]
    assert log.calls == ["search", "search", "get"]  # position 2 (after the last) is read once: it has no row
    log.calls.clear()
    assert memory.recall("Lisbon trip", owner="alice", conversation_id="c1", k=10).positions == [0, 1]
    assert log.calls == ["search", "search"]


def test_a_collection_of_the_earlier_layout_is_rebuilt_with_a_warning(
        memory: EpisodicMemory, milvus_client: Any, caplog: pytest.LogCaptureFixture) -> None:
    from llama_index_convrag.memory.episodic_schema import CURRENT, OLD, layout_of

    milvus_client.create_collection(memory.collection_name, dimension=384)  # no ``kind``: the earlier layout
    assert layout_of(milvus_client, memory.collection_name) == OLD
    with caplog.at_level("WARNING", logger="llama_index_convrag.memory.episodic"):
        assert memory.recall("peanut", owner="alice", conversation_id="c1", k=2).units == []
    assert "has the earlier layout" in caplog.text and "indexed again at its next turn" in caplog.text
    assert layout_of(milvus_client, memory.collection_name) == CURRENT
    memory.index(units())
    assert memory.count("alice", "c1") == len(TALK)
    assert memory.recall("peanut", owner="alice", conversation_id="c1", k=2).units


class WordLog(Counting):
    """The local model, logging each batch of texts it embeds and the thread that asked (``fail``: each batch
    raises)."""

    _batches: List[Any] = PrivateAttr(default_factory=list)
    _fail: bool = PrivateAttr(default=False)

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        import threading

        self._batches.append((threading.current_thread().name, list(texts)))
        if self._fail:
            raise ConnectionError("embedding service down")
        return self._inner.get_text_embedding_batch(texts)


def test_the_querys_words_are_embedded_beside_the_searches(milvus_client: Any, milvus_target: Any,
                                                           embed_model: Any, indexed: EpisodicMemory) -> None:
    import asyncio
    import threading

    from llama_index_convrag.memory.bridge import text_words

    log = WordLog(embed_model)
    memory = EpisodicMemory.from_defaults(embed_model=log, client=milvus_client, target=milvus_target,
                                          collection_name=indexed.collection_name)
    query = "Which snacks and nuts must Ana avoid?"
    got = memory.recall(query, owner="alice", conversation_id="c1", k=3)
    thread, words = log._batches[0]
    assert thread.startswith("convrag-recall-words") and words == text_words(query, memory.rules) == [
        "snacks", "nuts", "must", "ana", "avoid"]
    assert all(name == threading.current_thread().name for name, _ in log._batches[1:])  # the candidates' words
    assert got.to_record()["units"] == indexed.recall(query, owner="alice", conversation_id="c1",
                                                      k=3).to_record()["units"]
    log._batches.clear()
    assert memory.recall(query, owner="alice", conversation_id="c1", k=3).positions == got.positions
    assert log._batches == []  # every word cached now
    again = "Which peanuts and snacks does Ana fear?"
    loop_thread = []

    async def arecall() -> Any:
        loop_thread.append(threading.current_thread().name)
        return await memory.arecall(again, owner="alice", conversation_id="c1", k=3)

    agot = asyncio.run(arecall())
    [(thread, words), *rest] = log._batches
    assert words == ["fear"] and thread != loop_thread[0] and rest == []  # the one new word, in a worker thread
    assert agot.positions == memory.recall(again, owner="alice", conversation_id="c1", k=3).positions
    log._fail = True
    with pytest.raises(ConnectionError, match="embedding service down"):  # fails the recall, as before
        memory.recall("Which hills and jackets?", owner="alice", conversation_id="c1", k=3)
    memory.close()  # stops its word threads; a later recall makes them again
    log._fail = False
    assert memory.recall("Which hills and jackets?", owner="alice", conversation_id="c1", k=3).positions
    memory.close()


def test_a_word_prefetch_still_queued_when_the_searches_end_is_waited_for(
        milvus_client: Any, milvus_target: Any, embed_model: Any, indexed: EpisodicMemory) -> None:
    import threading
    import time
    from concurrent.futures import Executor, Future

    class LateStart(Executor):
        """Starts each job 0.3 s after it is submitted (queued behind other recalls' words)."""

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:  # type: ignore[override]
            future: Future = Future()

            def run() -> None:
                time.sleep(0.3)
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn(*args, **kwargs))
                    except BaseException as e:
                        future.set_exception(e)
            threading.Thread(target=run).start()
            return future

    log = WordLog(embed_model)
    memory = EpisodicMemory.from_defaults(embed_model=log, client=milvus_client, target=milvus_target,
                                          collection_name=indexed.collection_name)
    memory._word_threads._pool = LateStart()  # (the words job starts late)
    got = memory.recall("Which jackets keep the drizzle out?", owner="alice", conversation_id="c1", k=3)
    assert got.positions and log._batches[0][0] != threading.current_thread().name
    assert "drizzle" in log._batches[0][1] and not any("drizzle" in words for _, words in log._batches[1:])
