"""Where our chat engines differ from core's on purpose: one test per row of docs/COMPATIBILITY.md ("Chat engines"),
named by the row's id, each asserting what core's engine does and what ours (under core's name) does.

A test here fails when the difference goes away (core changed, or we did): then the row is out of date.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import time
from dataclasses import replace
from typing import Any, List

import llama_index.core.chat_engine as core
import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.indices.base import BaseIndex
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.settings import Settings

import llama_index_convrag.chat as ours
from llama_index_convrag.chat.core_names import CORE_ANSWER
from llama_index_convrag.chat.factory import index_chat_mode
from llama_index_convrag.testing import ScriptedLLM
from tests.differential.harness import (CORE_VERSION, ListRetriever, call_record, divergence, nodes_of, recording_llm,
                                        run_conversation, settings_llm, wait_until_written)

NODES = nodes_of(["The bridge opened in 1932 and carries trains.", "Paris is the capital of France."])
SEED = [ChatMessage(role="user", content="Tell me about the bridge."),
        ChatMessage(role="assistant", content="It crosses the river north of the city.")]


def cpc(module: Any, llm: Any, **kw: Any) -> Any:
    with settings_llm(llm if module is core else None):
        return module.CondensePlusContextChatEngine.from_defaults(ListRetriever(NODES), llm=llm, **kw)


def condense_question(module: Any, llm: Any, **kw: Any) -> Any:
    with settings_llm(llm if module is core else None):
        engine = RetrieverQueryEngine.from_args(ListRetriever(NODES), llm=llm)
        return module.CondenseQuestionChatEngine.from_defaults(engine, llm=llm, **kw)


def history_of(engine: Any) -> List[str]:
    return [str(m.content) for m in engine.chat_history]


@divergence("chat-no-settings-llm")
def test_no_llm_given_or_assigned(monkeypatch, embed_model):
    monkeypatch.setattr(Settings, "_llm", None)
    with pytest.raises(ValueError, match=r"OPENAI_API_KEY"):  # core's getter builds an OpenAI client
        core.CondensePlusContextChatEngine.from_defaults(ListRetriever(NODES))
    engine = ours.CondensePlusContextChatEngine.from_defaults(
        ListRetriever(NODES), answer=replace(CORE_ANSWER, embed_model=embed_model))
    answer = str(engine.chat("When did the bridge open?"))  # no LLM: extractive, from the passages
    assert "1932" in answer and engine.chat("And Paris?").metadata["turn"].rewrite_strategy == "contextual"


@divergence("condense-reply-cleaned")
def test_the_condense_reply_is_cleaned():
    def reply(prompt: str) -> str:
        return 'Standalone question: "When did the bridge open?"' if "<Standalone question>" in prompt else "1932."

    queries = []
    for module in (core, ours):
        llm = ScriptedLLM.from_fn(reply)
        engine = condense_question(module, llm, chat_history=SEED)
        engine.chat("when did it open?")
        queries.append(llm.prompts[-1].split("Query: ")[1].split("\n")[0])
    assert queries == ['Standalone question: "When did the bridge open?"', "When did the bridge open?"]


@divergence("explicit-empty-history")
@pytest.mark.parametrize("streaming", [False, True])
def test_an_explicit_empty_history(streaming):
    """Core 0.14.25 treats ``chat_history=[]`` like no argument (``chat_history or memory``) and condenses with its
    memory; ours answers the question as written, with no condense call (newer core does the same)."""
    calls = []
    for module in (core, ours):
        llm = recording_llm()
        engine = condense_question(module, llm, chat_history=SEED)
        if streaming:
            response = engine.stream_chat("fresh question", chat_history=[])
            "".join(response.response_gen)
            wait_until_written(response)
        else:
            engine.chat("fresh question", chat_history=[])
        calls.append(len(llm.calls))
    assert calls == [2, 1]


@divergence("chat-history-argument")
def test_a_history_passed_to_one_turn():
    """Core replaces its memory with a ``chat_history`` given to ``chat`` (later turns continue from it); ours answers
    that turn with it and keeps the stored conversation."""
    given = [ChatMessage(role="user", content="Tell me about Paris."), ChatMessage(role="assistant", content="A city.")]
    histories = []
    for module in (core, ours):
        engine = cpc(module, recording_llm(), chat_history=SEED)
        engine.chat("What is it?", chat_history=given)
        histories.append(history_of(engine)[:2])
    assert histories == [[m.content for m in given], [m.content for m in SEED]]


@divergence("memory-seeds-store")
def test_a_memory_object_seeds_the_conversation():
    sizes = []
    for module in (core, ours):
        memory = ChatMemoryBuffer.from_defaults(chat_history=list(SEED))
        engine = cpc(module, recording_llm(), memory=memory)
        engine.chat("When did it open?")
        sizes.append((len(memory.get_all()), len(engine.chat_history)))
    assert sizes == [(4, 4), (2, 4)]  # core writes into the memory given; ours into its conversation store


@divergence("stream-stopped-early")
def test_a_stream_the_reader_stops():
    llm_reply = "one two three four five six seven eight"
    kept = []
    for module in (core, ours):
        engine = cpc(module, ScriptedLLM.fixed(llm_reply))
        response = engine.stream_chat("When did the bridge open?")
        gen = response.response_gen
        next(gen)  # core 0.14.22 streams this answer in one delta, 0.14.25 word by word
        gen.close()
        deadline = time.monotonic() + 5
        while not response.is_done and time.monotonic() < deadline:
            time.sleep(0.01)
        kept.append(history_of(engine)[-1])
    assert kept[0] == llm_reply  # core generated and stored the whole answer
    assert kept[1] != llm_reply and llm_reply.startswith(kept[1])  # ours: what the reader got, cancelled


@divergence("condense-question-stream")
def test_streaming_over_a_query_engine():
    """Core switches a ``RetrieverQueryEngine``'s synthesizer to streaming for the call; ours asks the query engine as
    it was built (the same answer, one delta)."""
    runs = [run_conversation(lambda llm, m=module: condense_question(m, llm), {}, ["When did it open?"],
                             streaming=True) for module in (core, ours)]
    assert runs[0].answers == runs[1].answers
    assert [c[0] for c in runs[0].calls] == ["stream_complete"] and [c[0] for c in runs[1].calls] == ["complete"]


@divergence("failed-turn-kept")
def test_a_turn_whose_llm_call_fails():
    stored = []
    for module in (core, ours):
        engine = cpc(module, ScriptedLLM(mode="fixed", responses=["x"], fail_on_call=0))
        with pytest.raises(RuntimeError, match="scripted failure"):
            engine.chat("When did the bridge open?")
        stored.append(history_of(engine))
    assert stored[0] == []
    assert stored[1] == ["When did the bridge open?"]  # the answer is stored as an error, not in the history
    engine_messages = [m for m in engine.store.get_conversation(engine.conversation_id)]
    assert [(m.role, m.status) for m in engine_messages] == [("user", "complete"), ("assistant", "error")]


@divergence("system-prompt-condense-question")
def test_system_prompt_in_condense_question_mode():
    llm = recording_llm()
    with pytest.raises(NotImplementedError):
        condense_question(core, llm, system_prompt="Be brief.")
    with pytest.raises(ValueError, match=r"\['system_prompt'\] shape the answers of chat_mode 'condense_plus_context'"):
        condense_question(ours, llm, system_prompt="Be brief.")


@divergence("empty-or-marker-answer")
@pytest.mark.parametrize("reply", ["[1]", ""])
def test_an_answer_that_is_only_a_marker_or_empty(reply):
    answers = [str(cpc(module, ScriptedLLM.fixed(reply)).chat("When did the bridge open?"))
               for module in (core, ours)]
    assert answers[0] == (reply or "Empty Response")
    assert "1932" in answers[1]  # the retry is as empty; the extractive answer from the passages is shown


@divergence("echo-answer")
def test_an_answer_that_restates_the_question():
    question = "bridge opening year"
    answers = [str(cpc(module, ScriptedLLM.fixed(question)).chat(question)) for module in (core, ours)]
    assert answers[0] == question and "1932" in answers[1]


@divergence("answer-cut-at-limit")
def test_an_answer_cut_at_the_output_limit(openai_server):
    from llama_index_convrag.config.llm import resolve_llm

    openai_server.chat_responder = lambda body: {"content": " ".join(f"w{i}" for i in range(200))}
    llm = resolve_llm(base_url=openai_server.base_url, model="local", env={}, max_tokens=8, probe=False)
    theirs, mine = cpc(core, llm), cpc(ours, llm)
    text = str(theirs.chat("When did the bridge open?"))
    assert text.startswith("w0 w1") and history_of(theirs)[-1] == text
    response = mine.chat("When did the bridge open?")
    assert str(response).startswith("w0 w1") and response.metadata["turn"].status == "error"
    assert history_of(mine) == ["When did the bridge open?"]


@divergence("unknown-keywords-refused")
def test_a_keyword_the_engine_does_not_take():
    cpc(core, recording_llm(), similarity_top_k=3)  # core's from_defaults ignores it
    with pytest.raises(TypeError, match=r"from_defaults does not take \['similarity_top_k'\] \(similarity_top_k: "
                                        r"unknown\); accepted: \["):
        cpc(ours, recording_llm(), similarity_top_k=3)


@divergence("verbose-metadata")
def test_verbose(capsys):
    cpc(core, recording_llm(), chat_history=SEED, verbose=True).chat("When did it open?")
    assert "Condensed question: reply" in capsys.readouterr().out
    response = cpc(ours, recording_llm(), chat_history=SEED, verbose=True).chat("When did it open?")
    assert capsys.readouterr().out == "" and response.metadata["generated_question"].startswith("reply")


@divergence("memory-cls-refused")
def test_memory_cls():
    condense_question(core, recording_llm(), memory_cls=ChatMemoryBuffer)
    with pytest.raises(ValueError, match=r"memory_cls=ChatMemoryBuffer is not used: the conversation store keeps"):
        condense_question(ours, recording_llm(), memory_cls=ChatMemoryBuffer)


@divergence("prev-chunks")
def test_prev_chunks_of_the_context_engine():
    llm = recording_llm()
    with settings_llm(llm):
        theirs = core.ContextChatEngine.from_defaults(ListRetriever([]), llm=llm)
    mine = ours.ContextChatEngine.from_defaults(ListRetriever([]), llm=llm)
    assert str(theirs.chat("When?", prev_chunks=NODES)).startswith("reply")
    with pytest.raises(TypeError, match="prev_chunks"):
        mine.chat("When?", prev_chunks=NODES)


@divergence("default-chat-mode")
def test_the_index_default_chat_mode():
    assert inspect.signature(BaseIndex.as_chat_engine).parameters["chat_mode"].default.value == "best"
    assert index_chat_mode(None) == "condense_question"


@divergence("convrag-engine-defaults")
def test_convrag_chat_engine_has_its_own_defaults():
    """``ConvRAGChatEngine`` (our name) condenses only follow-ups that need it, with our condense prompt, and cites;
    the classes under core's names ask what core asks (``test_chat_engines.py``)."""
    calls = []
    for build in (lambda llm: cpc(ours, llm, chat_history=SEED),
                  lambda llm: ours.ConvRAGChatEngine.from_defaults(ListRetriever(NODES), llm,
                                                                   chat_mode="condense_plus_context",
                                                                   chat_history=SEED)):
        llm = recording_llm()
        build(llm).chat("What is the capital of France?")  # self-contained: needs no rewrite
        calls.append(len(llm.calls))
    assert calls == [2, 1]


@divergence("history-over-budget")
def test_history_longer_than_the_window_holds():
    """Core puts all its memory holds (up to the LLM's window less 256 tokens) in the answer prompt: 0.14.25 keeps 500
    tokens for the answer and the turn fails; 0.14.22 sizes that prompt with a 3900-token window and sends it over the
    LLM's. Ours fits history and passages into the budget (oldest turns dropped first, ``TrimReport``) and answers."""
    answer = "the bridge carries trains and cars across the river " * 12
    seed = [ChatMessage(role=r, content=c) for i in range(10)
            for r, c in (("user", f"question number {i}?"), ("assistant", answer))]
    llm = recording_llm(context_window=1000, num_output=32)
    if CORE_VERSION <= (0, 14, 22):
        cpc(core, llm, chat_history=seed).chat("and then?")
        assert all(f"question number {i}?" in llm.calls[-1].prompt for i in range(10))
    else:
        with pytest.raises(ValueError, match=r"(Chunk size|available context size) -\d+ (is|was) not"):
            cpc(core, llm, chat_history=seed).chat("and then?")
    llm = recording_llm(context_window=1000, num_output=32)
    response = cpc(ours, llm, chat_history=seed).chat("and then?")
    report = response.metadata["trim_report"]
    assert str(response).startswith("reply") and report.kept_history and 0 not in report.kept_history
    assert "question number 0?" not in llm.calls[-1].prompt and "question number 9?" in llm.calls[-1].prompt


def test_async_twins_match_the_sync_divergence_of_a_failed_turn():
    """The failed-turn row holds on ``achat`` too (the same store writes)."""
    engine = cpc(ours, ScriptedLLM(mode="fixed", responses=["x"], fail_on_call=0))
    with pytest.raises(RuntimeError):
        asyncio.run(engine.achat("When did the bridge open?"))
    assert [m.status for m in engine.store.get_conversation(engine.conversation_id)] == ["complete", "error"]
    assert call_record(recording_llm()) == []


@divergence("dropped-stream-pending")
def test_a_streamed_response_dropped_unread():
    theirs = cpc(core, ScriptedLLM.fixed("one two three"))
    wait_until_written(theirs.stream_chat("When did the bridge open?"))  # never read
    assert history_of(theirs) == ["When did the bridge open?", "one two three"]
    mine = cpc(ours, ScriptedLLM.fixed("one two three"))
    mine.stream_chat("When did the bridge open?")  # dropped unread
    gc.collect()
    assert history_of(mine) == ["When did the bridge open?"]
    assert [m.status for m in mine.store.get_conversation(mine.conversation_id)] == ["complete", "pending"]


@divergence("chat-store-view")
def test_set_messages_on_a_chat_store():
    from llama_index.core.storage.chat_store import SimpleChatStore

    from llama_index_convrag.storage.conversation import SQLiteConversationStore

    said = [ChatMessage(role="user", content="When did the bridge open?"),
            ChatMessage(role="assistant", content="In 1932.")]
    summary = [ChatMessage(role="system", content="The user asked about the bridge.")]
    theirs, mine = SimpleChatStore(), SQLiteConversationStore(":memory:")
    for store in (theirs, mine):
        for message in said:
            store.add_message("c1", message)
        store.set_messages("c1", summary)  # what a summarising memory does on get()
        assert [m.content for m in store.get_messages("c1")] == ["The user asked about the bridge."]
    assert theirs.get_keys() == ["c1"]  # core keeps only the summary
    assert [m.content for m in mine.get_conversation("c1")] == ["When did the bridge open?", "In 1932."]
    mine.close()
