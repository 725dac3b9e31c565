"""The chat engine with memory, end to end: a conversation longer than the window over a real index (Milvus Lite, the
local model) and the scripted LLM. What reaches the prompt (the recalled message, the summary, the facts) in each
chat mode, the one budget's report and the record, owners and conversations kept apart, deletion, the writes off
the turn's path, and what ``memory=`` accepts per class."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from llama_index.core import Document
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer, ChatSummaryMemoryBuffer, Memory, StaticMemoryBlock
from llama_index.core.memory import SimpleComposableMemory

from llama_index_convrag.chat import BudgetOptions, ConvRAGChatEngine, RewriteOptions
from llama_index_convrag.chat.blocks import BlockReport
from llama_index_convrag.errors import ConfigurationError, RecordNotFoundError
from llama_index_convrag.memory import EpisodicOptions, FactsOptions, MemoryOptions, SummaryOptions
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.testing import ScriptedLLM
from tests.chat.conftest import DOCS

ANSWER = "Here is what I know."
TALK = [
    "My sister Ana is allergic to peanuts.",  # the turn recalled at the end
    "I live in Lisbon.",  # a fact
    "Who directed Inception?",
    "What is the capital of Germany?",
    "I live in Lisbon.",  # the same fact again: stored once
    "What is BM25?",
]
LAST = "Which food must my sister avoid because of her allergy?"


def scripted(calls: Optional[List[str]] = None, fold_delay: float = 0.0) -> ScriptedLLM:
    """Answers each prompt by its kind: the summary fold, fact extraction and reconciling, the answer."""

    def reply(prompt: str) -> str:
        if calls is not None:
            calls.append(prompt)
        if prompt.startswith("You keep a short running summary"):
            time.sleep(fold_delay)
            folded = prompt.split("New messages:", 1)[1].split("New summary:", 1)[0]
            return "SUMMARY " + " | ".join(line.split(": ", 1)[1][:30] for line in folded.strip().splitlines()
                                           if line.startswith("user: "))
        if prompt.startswith("Read the user's message"):
            message = prompt.split("User message:", 1)[1].split("Facts:", 1)[0]
            if "I live in" in message:
                return "- The user lives in " + message.split("I live in ", 1)[1].split(".", 1)[0] + "."
            if "sister" in message:
                return "- The user's sister Ana is allergic to peanuts."
            return "NONE"
        if prompt.startswith("A new fact about the user"):
            return "ADD"
        return ANSWER

    return ScriptedLLM.from_fn(reply)


@pytest.fixture(scope="module")
def docs_index(milvus_client: Any, milvus_target: Any, embed_model: Any) -> Iterator[Any]:
    from llama_index_convrag.indices import ConvRAGIndex

    name = "chat_memory_docs"
    index = ConvRAGIndex.from_documents([Document(text=t, id_=k) for k, t in DOCS], collection_name=name,
                                        embed_model=embed_model, client=milvus_client,
                                        target=milvus_target)  # the target: async turns open Milvus' async client
    yield index
    milvus_client.drop_collection(name)


OPTIONS = MemoryOptions(episodic=EpisodicOptions(window=4, k=3, collection_name="chat_memory_recall"),
                        summary=SummaryOptions(window=4), facts=FactsOptions(enabled=True))


def build(docs_index: Any, store: Any, llm: Any, options: MemoryOptions = OPTIONS, **kw: Any) -> ConvRAGChatEngine:
    return docs_index.as_chat_engine(llm=llm, conversation_store=store, memory=options,
                                     rewrite=RewriteOptions(strategy="none"),
                                     retriever_kwargs={"similarity_top_k": 2}, **kw)


def talk(engine: ConvRAGChatEngine, lines: List[str] = TALK) -> None:
    for line in lines:
        engine.chat(line)
        assert engine.flush_memory(30)


def answer_prompts(calls: List[str]) -> List[str]:
    return [c for c in calls if "Context information" in c]


def test_a_long_conversation_recalls_summarises_and_remembers(docs_index: Any, store: Any) -> None:
    calls: List[str] = []
    with build(docs_index, store, scripted(calls)) as engine:
        talk(engine)
        calls.clear()
        response = engine.chat(LAST)
        memory = engine.memory
        assert memory is not None and memory.parts == ["recall", "summary", "facts"]
        [prompt] = answer_prompts(calls)
        # the recalled first message reaches the prompt with its position and date, under its heading
        assert "Earlier messages of this conversation that bear on the question (#position, date):" in prompt
        assert "] user: My sister Ana is allergic to peanuts." in prompt and "[#0 (" in prompt
        # the summary folded what left the window (4 messages), and the facts are in it once each
        summary = memory.summary("local", engine.conversation_id)
        assert summary is not None and summary.text.startswith("SUMMARY ") and summary.source == "llm"
        assert "Summary of the conversation so far:\n" + summary.text in prompt
        assert [f.text for f in memory.facts("local")] == ["The user's sister Ana is allergic to peanuts.",
                                                           "The user lives in Lisbon."]
        assert "- The user lives in Lisbon." in prompt and prompt.count("The user lives in Lisbon.") == 1
        assert prompt.index("Conversation memory") < prompt.index("Question: " + LAST)
        # the record: what was recalled, why and at what score; what the budget kept; the assembled context
        record = response.metadata["turn"]
        recall = record.memory["recall"]
        first = next(u for u in recall["units"] if u["position"] == 0)
        assert first["score"] > 0 and first["found_by"] and first["text"] == TALK[0]
        assert 0 in record.memory["recalled_kept"] and record.memory["before"] == 12 - 4
        assert all(u["position"] < 8 for u in recall["units"])
        assert record.memory["summary"]["version"] == summary.version
        assert record.memory["facts"] == [{"id": f.id, "text": f.text} for f in memory.facts("local")]
        report = response.metadata["trim_report"]
        assert isinstance(report, BlockReport) and report.tokens["recalled"] > 0 and report.tokens["summary"] > 0
        assert record.trim_report == report.to_dict() and record.trim_report["kept_chunks"] == [0, 1]
        assert record.context["placement"] == "query"
        blocks = dict((name, items) for name, items in record.context["blocks"])
        assert list(blocks) == ["system", "facts", "summary", "recalled", "evidence", "question"]
        assert blocks["question"] == [LAST] and record.context["memory_text"] in prompt
        assert record.synthesis_query.endswith("Question: " + LAST)
        assert store.get_turn_record(response.metadata["message_id"])["context"] == record.context
        # the writes: each turn's messages indexed, the summary folded once per turn past the window
        assert engine.flush_memory(30)
        writes = [r.value for r in memory.writer.results]
        assert [w.fold is not None and w.fold["llm_calls"] for w in writes] == [0, 0, 1, 1, 1, 1, 1]
        assert sum(w.indexed for w in writes) == 14 and not memory.writer.failures
        assert memory.episodic.count("local", engine.conversation_id) == 14
    assert not [t for t in threading.enumerate() if t.name.startswith("convrag-memory-writer")]


def test_the_user_edits_clears_the_summary_and_deletes_a_fact(docs_index: Any, store: Any) -> None:
    calls: List[str] = []
    with build(docs_index, store, scripted(calls)) as engine:
        talk(engine)
        memory, cid = engine.memory, engine.conversation_id
        assert memory is not None
        folded = memory.summary_versions("local", cid)
        assert [v.source for v in folded] == ["llm"] * len(folded) and len(folded) == 4
        # edited: a new version, which the next turn reads; the versions before it stay listed
        edited = memory.edit_summary("local", cid, "Ana is the user's sister; she is allergic to peanuts.")
        assert edited.version == folded[-1].version + 1 and edited.source == "edit"
        assert edited.covers_to == folded[-1].covers_to
        assert [v.version for v in memory.summary_versions("local", cid)] == [v.version for v in folded] + [
            edited.version]
        calls.clear()
        engine.chat(LAST)
        assert "Summary of the conversation so far:\nAna is the user's sister" in answer_prompts(calls)[0]
        assert engine.flush_memory(30)
        # cleared: every version goes, and the next turn has no summary block
        versions = len(memory.summary_versions("local", cid))
        assert versions > len(folded) and memory.clear_summary("local", cid) == versions
        assert memory.summary("local", cid) is None and memory.summary_versions("local", cid) == []
        # a fact deleted by its owner is out of the next prompt; the other stays
        lisbon = next(f for f in memory.facts("local") if "Lisbon" in f.text)
        assert memory.delete_fact("local", lisbon.id) is True and memory.delete_fact("local", lisbon.id) is False
        calls.clear()
        response = engine.chat("Thanks. And BM25?")
        [prompt] = answer_prompts(calls)
        assert "Lisbon" not in prompt.split("Question:")[0].split("Earlier messages")[0]
        assert "- The user's sister Ana is allergic to peanuts." in prompt
        assert "Summary of the conversation so far" not in prompt
        assert response.metadata["turn"].memory["summary"] is None
        assert [f.text for f in memory.facts("local")] == ["The user's sister Ana is allergic to peanuts."]


def test_the_budget_cuts_history_then_recalled_first_and_reports_it(docs_index: Any, store: Any) -> None:
    calls: List[str] = []
    options = MemoryOptions(episodic=EpisodicOptions(window=2, k=5, collection_name="chat_memory_recall"),
                            summary=SummaryOptions(window=2))
    llm = scripted(calls)
    llm.context_window, llm.num_output = 700, 100  # a budget of 0.4 x 600 = 240 tokens, about 370 asked for
    with build(docs_index, store, llm, options, chat_mode="condense_plus_context",
               budget=BudgetOptions(ratio=0.4)) as engine:
        talk(engine)
        calls.clear()
        response = engine.chat(LAST)
    report = response.metadata["trim_report"]
    cut = {d.section for d in report.dropped}
    assert report.budget == 240 and report.total <= 240 and cut == {"history", "recalled"}
    assert [d.section for d in report.dropped][0] == "history" and report.tokens["history"] == 0
    assert report.tokens_before["recalled"] > report.tokens["recalled"]
    kept = response.metadata["turn"].memory["recalled_kept"]
    assert len(kept) == len(report.kept["recalled"]) < 5
    # condense_plus_context: the memory goes into the system message, after the documents (the scripted LLM is a
    # completion model, so the messages reach it flattened: the system message, then the question)
    [prompt] = [c for c in calls if c.startswith("system: ")]
    system = prompt.split("\nuser: " + LAST, 1)[0]
    assert "Here are the relevant documents" in system and "Conversation memory" in system
    assert system.index("Here are the relevant documents") < system.index("Conversation memory")
    assert response.metadata["turn"].context["placement"] == "system"


def test_owners_and_conversations_are_kept_apart(docs_index: Any, store: Any) -> None:
    calls: List[str] = []
    alice_cid = store.create_conversation("alice").id
    bob_cid = store.create_conversation("bob").id
    with build(docs_index, store, scripted(calls)) as engine:
        alice = engine.for_conversation(alice_cid, owner="alice")
        talk(alice)
        bob = engine.for_conversation(bob_cid, owner="bob")
        talk(bob, ["I live in Porto.", "Who directed Inception?", "What is BM25?", "Where is the Eiffel Tower?"])
        calls.clear()
        response = bob.chat(LAST)
        memory = engine.memory
        assert memory is not None
        [prompt] = answer_prompts(calls)
        assert "peanut" not in prompt and "Lisbon" not in prompt  # nothing of alice's
        assert all(u["text"] != TALK[0] for u in response.metadata["turn"].memory["recall"]["units"])
        assert [f.text for f in memory.facts("bob")] == ["The user lives in Porto."]
        assert memory.summary("bob", alice_cid) is None and memory.summary("alice", bob_cid) is None
        assert memory.recall_debug("alice", alice_cid, "peanuts", window=False).units
        with pytest.raises(RecordNotFoundError):
            memory.recall_debug("bob", alice_cid, "peanuts")
        with pytest.raises(RecordNotFoundError):
            memory.edit_summary("bob", alice_cid, "mine now")
        assert memory.delete_fact("bob", memory.facts("alice")[0].id) is False
        # another conversation of alice's: her facts (user-level) but none of the first conversation's messages
        other = engine.for_conversation(store.create_conversation("alice").id, owner="alice")
        talk(other, ["Hello there.", "What is Milvus?", "And BM25?"])
        calls.clear()
        again = other.chat(LAST)
        assert "The user lives in Lisbon." in answer_prompts(calls)[0]
        assert again.metadata["turn"].memory["recall"]["units"] == [] or all(
            u["text"] != TALK[0] for u in again.metadata["turn"].memory["recall"]["units"])


def test_deleting_a_conversation_deletes_its_memory(docs_index: Any, store: Any) -> None:
    with build(docs_index, store, scripted()) as engine:
        talk(engine)
        memory, cid = engine.memory, engine.conversation_id
        assert memory is not None and memory.episodic.count("local", cid) == 12
        assert memory.summary("local", cid) is not None
        facts = memory.facts("local")
        assert engine.delete_conversation() == 12
        assert memory.episodic.count("local", cid) == 0 and memory.summary("local", cid) is None
        assert store.get_conversation(cid) == [] and memory.facts("local") == facts  # facts are the user's
        bob = engine.for_conversation(store.create_conversation("bob").id, owner="bob")
        with pytest.raises(RecordNotFoundError):
            bob.delete_conversation(store.create_conversation("carol").id)


def test_writes_run_after_the_turn_returns_and_failures_are_recorded(docs_index: Any, store: Any,
                                                                     caplog: Any) -> None:
    with build(docs_index, store, scripted(fold_delay=0.5)) as engine:
        for line in TALK[:3]:
            engine.chat(line)  # the third turn's commit queues a fold (6 messages, window 4)
        memory = engine.memory
        assert memory is not None and memory.writer.pending >= 1  # the turn returned; its fold is still running
        assert engine.flush_memory(30) and memory.writer.pending == 0
    failing = ScriptedLLM.from_fn(lambda p: (_ for _ in ()).throw(RuntimeError("fold down"))
                                  if p.startswith("You keep") else "NONE" if p.startswith("Read") else ANSWER)
    with build(docs_index, store, failing) as engine:
        talk(engine, TALK[:3])
        assert engine.memory is not None
        [failure] = engine.memory.writer.failures
        assert failure.error == "summary: RuntimeError: fold down" and "fold down" in caplog.text
        assert engine.memory.episodic.count("local", engine.conversation_id) == 6  # the other parts ran
    assert engine.close() and engine.memory.writer.closed
    engine.chat("one more")  # the turn still completes; its writes are refused and recorded
    assert engine.memory.writer.failures[-1].error.startswith("the memory writer is closed")


def test_concurrent_conversations_write_apart_in_order_and_lost_writes_are_caught_up(
        docs_index: Any, store: Any, milvus_client: Any) -> None:
    from llama_index_convrag.memory.units import unit_key

    options = dataclasses.replace(OPTIONS, facts=FactsOptions(), writers=3)
    owners = ["alice", "bob", "alice", "carol"]
    with build(docs_index, store, scripted(), options) as engine:
        memory = engine.memory
        assert memory is not None and memory.writer.workers == 3
        twins = [engine.for_conversation(store.create_conversation(o).id, owner=o) for o in owners]
        lines = {t.conversation_id: [f"{t.owner} note {n} of {t.conversation_id[:6]}" for n in range(4)]
                 for t in twins}
        threads = [threading.Thread(target=lambda t=t: [t.chat(line) for line in lines[t.conversation_id]])
                   for t in twins]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert engine.flush_memory(60) and not memory.writer.failures
        for t in twins:
            cid = t.conversation_id
            users = [m.id for m in store.get_conversation(cid) if m.role == "user"]
            # the conversation's writes ran in its turns' order, and its rows hold its own messages only
            assert [r.value.user_message_id for r in memory.writer.results if r.value.conversation_id == cid] == users
            assert memory.episodic.count(t.owner, cid) == 8
            recalled = memory.recall_debug(t.owner, cid, "note", k=8, window=False).units
            assert {u.text for u in recalled if u.text != ANSWER} == set(lines[cid])
        # writes lost (a crash, or dropped at shutdown): the conversation's next turn indexes what its rows lack
        first = twins[0]
        milvus_client.delete(options.episodic.collection_name,
                             ids=[unit_key(first.owner, first.conversation_id, p) for p in range(4)])
        assert memory.episodic.count(first.owner, first.conversation_id) == 4
        first.chat("one more note")
        assert engine.flush_memory(30)
        last = memory.writer.results[-1].value
        assert (last.caught_up, last.indexed) == (4, 6)
        assert memory.episodic.count(first.owner, first.conversation_id) == 10


def test_async_and_streamed_turns_read_memory_too(docs_index: Any, store: Any) -> None:
    calls: List[str] = []
    engine = build(docs_index, store, scripted(calls))
    talk(engine)

    async def go() -> Dict[str, Any]:
        response = await engine.achat(LAST)
        streamed = await engine.astream_chat(LAST)
        assert "".join([d async for d in streamed.async_response_gen()]) == ANSWER
        await engine.aclose()
        return {"chat": response.metadata["turn"].memory, "stream": streamed.metadata["turn"].memory}

    got = asyncio.run(go())
    assert 0 in got["chat"]["recalled_kept"] and 0 in got["stream"]["recalled_kept"]
    sync_stream = build(docs_index, store, scripted(calls), conversation_id=engine.conversation_id)
    streamed = sync_stream.stream_chat(LAST)
    assert "".join(streamed.response_gen) == ANSWER and 0 in streamed.metadata["turn"].memory["recalled_kept"]
    assert sync_stream.close(30)


def test_without_an_llm_memory_is_written_not_read(docs_index: Any, store: Any) -> None:
    options = MemoryOptions(episodic=EpisodicOptions(window=4, collection_name="chat_memory_recall"),
                            summary=SummaryOptions(window=4, no_llm="salient"))
    with docs_index.as_chat_engine(llm=None, conversation_store=store, memory=options) as engine:
        talk(engine, TALK[:4])
        response = engine.chat(LAST)
        assert response.metadata["turn"].memory is None and response.metadata["turn"].context is None
        memory = engine.memory
    assert memory is not None and memory.episodic.count("local", engine.conversation_id) == 10
    assert memory.summary("local", engine.conversation_id).source == "salient"
    with pytest.raises(ConfigurationError, match=r"user facts \(FactsOptions\(enabled=True\)\) need an LLM"):
        docs_index.as_chat_engine(llm=None, conversation_store=store, memory=OPTIONS)


# --- what memory= accepts, per class -------------------------------------------------------------------------
def test_a_core_memory_seeds_and_its_blocks_join_the_budget(docs_index: Any, store: Any) -> None:
    calls: List[str] = []
    core = Memory.from_defaults(session_id="core-test", token_limit=2000, memory_blocks=[
        StaticMemoryBlock(name="house_rules", static_content="Always answer in one sentence.", priority=0)],
        chat_history=[ChatMessage(role="user", content="Hi, I am Ana."),
                      ChatMessage(role="assistant", content="Hello Ana.")])
    with docs_index.as_chat_engine(llm=scripted(calls), conversation_store=store, memory=core,
                                   rewrite=RewriteOptions(strategy="none")) as engine:
        assert [m.content for m in engine.chat_history] == ["Hi, I am Ana.", "Hello Ana."]
        response = engine.chat("Who directed Inception?")
        [prompt] = answer_prompts(calls)
        assert "house_rules:\nAlways answer in one sentence." in prompt
        assert response.metadata["turn"].memory["memory_blocks"] == ["house_rules"]
        assert response.metadata["trim_report"].tokens["memory_blocks"] > 0
        assert engine.memory is not None and engine.memory.parts == ["memory_blocks"]


def test_a_chat_memory_buffer_seeds_the_conversation(docs_index: Any, store: Any) -> None:
    buffer = ChatMemoryBuffer.from_defaults(chat_history=[ChatMessage(role="user", content="Hi.")])
    engine = docs_index.as_chat_engine(llm=scripted(), conversation_store=store, memory=buffer)
    assert [m.content for m in engine.chat_history] == ["Hi."] and engine.memory is None


@pytest.mark.parametrize("make, message", [
    (lambda llm: ChatSummaryMemoryBuffer.from_defaults(llm=llm),
     r"ChatSummaryMemoryBuffer summarises the history when it is read.*use memory=MemoryOptions\(\)"),
    (lambda llm: SimpleComposableMemory.from_defaults(),
     r"memory=SimpleComposableMemory is not one the engine can honour.*accepted: \['MemoryOptions'"),
])
def test_memories_the_engine_would_drop_are_refused(docs_index: Any, store: Any, make: Callable, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        docs_index.as_chat_engine(llm=scripted(), conversation_store=store, memory=make(scripted()))


def test_bad_memory_arguments_are_named(docs_index: Any, store: Any, retriever: Any) -> None:
    with pytest.raises(TypeError, match=r"memory must be one of \['MemoryOptions', 'ConversationMemory'"):
        docs_index.as_chat_engine(llm=scripted(), conversation_store=store, memory="on")
    with pytest.raises(ConfigurationError, match=r"takes Milvus and the embedding model from a "
                                                 r"MilvusHybridRetriever \(the engine has VectorIndexRetriever\)"):
        ConvRAGChatEngine.from_defaults(retriever, scripted(), conversation_store=store, memory=MemoryOptions())
    with pytest.raises(ConfigurationError, match=r"memory needs a SQL conversation store"):
        from llama_index_convrag.memory import ConversationMemory
        ConversationMemory(options=MemoryOptions.off(), store=object())
    other = SQLiteConversationStore(":memory:")
    from llama_index_convrag.memory import ConversationMemory
    elsewhere = ConversationMemory.from_defaults(MemoryOptions.off(), store=other)
    with pytest.raises(ConfigurationError, match=r"the memory keeps its rows in another store than this port's"):
        ConvRAGChatEngine.from_defaults(retriever, scripted(), conversation_store=store, memory=elsewhere)


# --- retrieval and recall at once ------------------------------------------------------------------------------
BESIDE = MemoryOptions(episodic=EpisodicOptions(window=2, k=2, collection_name="chat_memory_beside"),
                       summary=SummaryOptions(enabled=False))


def beside_engine(docs_index: Any, store: Any) -> ConvRAGChatEngine:
    """Two turns, so that the next one recalls (window 2: positions 0-1 lie outside it)."""
    engine = build(docs_index, store, scripted(), options=BESIDE)
    talk(engine, TALK[:2])
    return engine


def test_recall_runs_beside_retrieval_with_one_query_embedding(docs_index: Any, store: Any, embed_model: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    engine = beside_engine(docs_index, store)
    memory = engine.memory
    assert memory is not None and memory.episodic is not None
    question = "Which food is Ana allergic to, asked beside the retrieval?"  # new: its embedding is not cached
    embedded: List[str] = []
    embed = type(embed_model).embed
    monkeypatch.setattr(type(embed_model), "embed", lambda self, texts: embedded.extend(texts) or embed(self, texts))
    recall, threads = memory.episodic.recall, []
    monkeypatch.setattr(memory.episodic, "recall", lambda *a, **kw: threads.append(
        threading.current_thread().name) or recall(*a, **kw))
    response = engine.chat(question)
    assert embedded.count(question) == 1  # the recall's and the retrieval's embedding: one model call
    assert len(threads) == 1 and threads[0].startswith("convrag-recall")
    record = response.metadata["turn"]
    assert record.retrieved_ids["retrieve"] and response.source_nodes  # the evidence, retrieved on this thread
    assert [u["position"] for u in record.memory["recall"]["units"]][:1] == [0] and record.memory["before"] == 2
    assert record.memory["recalled_kept"] == sorted(u["position"] for u in record.memory["recall"]["units"])
    assert engine.close(30)
    assert not [t for t in threading.enumerate() if t.name.startswith("convrag-recall")]


@pytest.mark.parametrize("recall_fails", [False, True])
@pytest.mark.parametrize("run_async", [False, True])
def test_a_failing_retrieval_fails_the_turn_beside_recall(docs_index: Any, store: Any, recall_fails: bool,
                                                          run_async: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = beside_engine(docs_index, store)
    recalls: List[str] = []

    def down(*a: Any, **kw: Any) -> Any:
        raise ConnectionError("milvus down")

    async def adown(*a: Any, **kw: Any) -> Any:
        raise ConnectionError("milvus down")

    monkeypatch.setattr(engine._retriever, "_retrieve", down)
    monkeypatch.setattr(engine._retriever, "_aretrieve", adown)
    if recall_fails:
        def broken(*a: Any, **kw: Any) -> Any:
            recalls.append("sync")
            raise RuntimeError("recall down")

        async def abroken(*a: Any, **kw: Any) -> Any:
            recalls.append("async")
            raise RuntimeError("recall down")

        monkeypatch.setattr(engine.memory.episodic, "recall", broken)
        monkeypatch.setattr(engine.memory.episodic, "arecall", abroken)
    with pytest.raises(ConnectionError, match="milvus down"):  # the retrieval's error, whatever the recall did
        asyncio.run(engine.achat("Who directed Inception?")) if run_async else engine.chat("Who directed Inception?")
    *_, user, assistant = store.get_conversation(engine.conversation_id)
    assert (user.content, assistant.status, assistant.error) == ("Who directed Inception?", "error",
                                                                 "ConnectionError: milvus down")
    assert store.get_turn_record(assistant.id)["status"] == "error"
    assert recalls in ([], ["async" if run_async else "sync"])  # started beside it, or cancelled before it ran
    assert engine.close(30)


@pytest.mark.parametrize("run_async", [False, True])
def test_a_failing_recall_fails_the_turn_as_before(docs_index: Any, store: Any, run_async: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    engine = beside_engine(docs_index, store)
    retrieved: List[int] = []
    retrieve, aretrieve = engine._retriever._retrieve, engine._retriever._aretrieve

    async def counted(q: Any) -> Any:
        retrieved.append(1)
        return await aretrieve(q)

    monkeypatch.setattr(engine._retriever, "_retrieve", lambda q: retrieved.append(1) or retrieve(q))
    monkeypatch.setattr(engine._retriever, "_aretrieve", counted)

    def broken(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("recall down")

    async def abroken(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("recall down")

    monkeypatch.setattr(engine.memory.episodic, "recall", broken)
    monkeypatch.setattr(engine.memory.episodic, "arecall", abroken)
    with pytest.raises(RuntimeError, match="recall down"):
        asyncio.run(engine.achat("Who directed Inception?")) if run_async else engine.chat("Who directed Inception?")
    *_, assistant = store.get_conversation(engine.conversation_id)
    assert (assistant.status, assistant.error) == ("error", "RuntimeError: recall down")
    assert retrieved == [1]  # the retrieval ran beside it
    assert engine.close(30)


def test_a_turn_inside_the_window_recalls_nothing_and_says_why(docs_index: Any, store: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    engine = build(docs_index, store, scripted(), options=BESIDE)
    talk(engine, TALK[:1])
    calls: List[Any] = []
    monkeypatch.setattr(engine.memory, "recall_query", lambda text: calls.append(text))
    record = engine.chat("Who directed Inception?").metadata["turn"]
    assert calls == [] and record.memory["recall"] is None  # no embedding for a recall, no search
    assert record.memory["skipped"] == {"recall": "every earlier message is in the recent window"}
    assert record.retrieved_ids["retrieve"]
    assert engine.close(30)
