"""ConvRAGChatEngine over a real Milvus Lite index, the real local embeddings, core's synthesizer, a ScriptedLLM
and a real SQLite file. Exact prompts and exact call counts."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from pathlib import Path
from typing import Any, List

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.base.response.schema import Response
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.response_synthesizers import get_response_synthesizer
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.chat import AnswerOptions, BudgetOptions, ConvRAGChatEngine, RewriteOptions
from llama_index_convrag.chat.port import StoreTurnPort
from llama_index_convrag.prompts.chat import DEFAULT_ANSWER_QUERY_TEMPLATE
from llama_index_convrag.conversational.retriever import ConversationalRetriever
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.testing import ScriptedFailure, ScriptedLLM
from tests.chat.conftest import FixedRetriever, word_count
from tests.fakes import EventCollector, run_threads

REWRITE = "When was the film Inception released?"


def make(retriever: Any, store: Any, llm: Any = None, condense: Any = None, rewrite: Any = None, answer: Any = None,
         **kw: Any) -> ConvRAGChatEngine:
    """``rewrite`` / ``answer``: fields of RewriteOptions (the condense LLM: ``condense``) / AnswerOptions (citations
    off unless given: these tests read the model's own words)."""
    llm = llm if llm is not None else ScriptedLLM.fixed("Inception came out in 2010 [1].")
    return ConvRAGChatEngine.from_defaults(
        retriever, llm, conversation_store=store, conversation_id="conv",
        rewrite=RewriteOptions(llm=condense, **(rewrite if rewrite is not None else {})),
        answer=AnswerOptions(**{"citations": False, **(answer if answer is not None else {})}), **kw)


def answer_prompts(llm: ScriptedLLM) -> List[str]:
    return [p for p in llm.prompts if "Context information is below" in p]


def test_first_turn_no_condense_call(retriever: Any, store: Any) -> None:
    llm, condense = ScriptedLLM.fixed("Nolan."), ScriptedLLM.fixed(REWRITE)
    engine = make(retriever, store, llm, condense, rewrite={"trigger": None})
    resp = engine.chat("Who directed Inception?")
    assert (condense.call_count, llm.call_count, resp.response) == (0, 1, "Nolan.")
    record = resp.metadata["turn"]
    assert (record.retrieval_query, record.rewrite_skipped_reason) == ("Who directed Inception?", "no history")
    assert record.retrieved_ids["retrieve"][0] == "inception"
    expected_final = [n.node.ref_doc_id or n.node.node_id for n in resp.source_nodes]
    assert record.retrieved_ids["final"] == expected_final and expected_final


def test_explicit_empty_history_counts_as_none(retriever: Any, store: Any) -> None:
    condense = ScriptedLLM.fixed(REWRITE)
    engine = make(retriever, store, condense=condense, rewrite={"trigger": None})
    engine.chat("Who directed Inception?")
    resp = engine.chat("When was it released?", chat_history=[])
    assert condense.call_count == 0
    assert resp.metadata["turn"].retrieval_query == "When was it released?"
    assert len(store.get_conversation("conv")) == 4  # the turn is still stored


def test_rewrite_used_for_retrieval_not_stored(retriever: Any, store: Any) -> None:
    llm, condense = ScriptedLLM.fixed("2010 [1]."), ScriptedLLM.fixed(REWRITE)
    engine = make(retriever, store, llm, condense, rewrite={"trigger": None},
                  answer={"return_generated_question": True})
    engine.chat("Tell me about Christopher Nolan's films")
    resp = engine.chat("When was it released?")
    assert condense.call_count == 1 and llm.call_count == 2
    assert condense.prompts[0].endswith(
        "<Chat History>\nuser: Tell me about Christopher Nolan's films\nassistant: 2010 [1].\n\n"
        "<Follow Up Message>\nWhen was it released?\n\n<Standalone question>\n")
    assert resp.metadata["generated_question"] == REWRITE == resp.metadata["turn"].retrieval_query
    assert resp.metadata["turn"].retrieved_ids["retrieve"][0] == "inception"
    assert [m.content for m in store.get_conversation("conv") if m.role == "user"] == [
        "Tell me about Christopher Nolan's films", "When was it released?"]
    # rephrase_question=True: the synthesizer sees the rewrite
    assert f"Query: {REWRITE}\nAnswer: " in answer_prompts(llm)[-1]


def test_rephrase_false_synthesizer_sees_user_words_and_history(retriever: Any, store: Any) -> None:
    llm, condense = ScriptedLLM.fixed("Nolan."), ScriptedLLM.fixed(REWRITE)
    engine = make(retriever, store, llm, condense, rewrite={"trigger": None}, answer={"rephrase_question": False})
    engine.chat("Who directed Inception?")
    resp = engine.chat("When was it released?")
    expected = DEFAULT_ANSWER_QUERY_TEMPLATE.format(
        chat_history="user: Who directed Inception?\nassistant: Nolan.", question="When was it released?")
    assert resp.metadata["turn"].synthesis_query == expected
    assert resp.metadata["turn"].retrieval_query == REWRITE
    assert f"Query: {expected}\nAnswer: " in answer_prompts(llm)[-1]
    assert "generated_question" not in resp.metadata


def test_return_source_nodes_both_ways(retriever: Any, store: Any) -> None:
    resp = make(retriever, store).chat("Who directed Inception?")
    assert [n.node.node_id for n in resp.source_nodes][0] == "inception" and len(resp.sources) == 1
    resp = make(retriever, store, answer={"return_source_nodes": False}).chat("Who directed Inception?")
    assert (resp.source_nodes, resp.sources) == ([], [])


def test_no_docs_fixed_reply_zero_llm_calls(retriever: Any, store: Any) -> None:
    llm = ScriptedLLM.fixed("never")
    engine = make(retriever, store, llm, node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=1.01)],
                  answer={"no_docs_reply": "Nothing found."})
    resp = engine.chat("Who directed Inception?")
    assert (resp.response, llm.call_count) == ("Nothing found.", 0)
    record = store.get_turn_record(resp.metadata["message_id"])
    assert record["status"] == "no_docs" and len(record["retrieved_ids"]["retrieve"]) == 3
    assert record["retrieved_ids"]["SimilarityPostprocessor"] == []
    assert store.get_message(resp.metadata["message_id"]).status == "complete"


def test_max_tokens_limit_caps_context(retriever: Any, store: Any) -> None:
    llm = ScriptedLLM.fixed("ok")
    engine = make(retriever, store, llm, budget=BudgetOptions(max_tokens_limit=15, count_tokens=word_count))
    resp = engine.chat("Who directed Inception?")
    report = resp.metadata["trim_report"]
    assert report.kept_chunks == [0] and report.tokens["context"] <= 15
    assert [(d.section, d.index, d.reason) for d in report.dropped] == [
        ("context", 2, "max_tokens_limit 15"), ("context", 1, "max_tokens_limit 15")]
    assert [n.node.node_id for n in resp.source_nodes] == ["inception"]
    assert "Interstellar" not in answer_prompts(llm)[0]


def test_budget_trims_oldest_history_first(retriever: Any, store: Any) -> None:
    llm = ScriptedLLM.fixed("one two three four five six seven eight", context_window=1200, num_output=20)
    # a counter that sees 10 tokens per word: the budget bites while core's own prompt packing stays happy
    engine = make(retriever, store, llm, answer={"rephrase_question": False}, rewrite={"strategy": "none"},
                  budget=BudgetOptions(count_tokens=lambda text: 10 * word_count(text)))
    for q in ("first", "second", "third"):
        engine.chat(f"{q} question about the films of the director and the cities of Europe please")
    resp = engine.chat("Who directed Inception?")
    report = resp.metadata["trim_report"]
    assert report.total <= report.budget == int(0.95 * (1200 - 20))
    assert [(d.section, d.index) for d in report.dropped] == [("history", 0)]
    assert report.kept_history == [1, 2] and report.kept_chunks == [0, 1, 2]
    assert "first question" not in resp.metadata["turn"].synthesis_query
    assert "second question" in resp.metadata["turn"].synthesis_query
    assert "third question" in resp.metadata["turn"].synthesis_query


def test_get_chat_history_formatter_used(retriever: Any, store: Any) -> None:
    condense = ScriptedLLM.fixed(REWRITE)
    engine = make(retriever, store, condense=condense, rewrite={
        "trigger": None, "get_chat_history": lambda msgs: " | ".join(f"{m.role.value[0]}:{m.content}" for m in msgs)})
    engine.chat("Who directed Inception?")
    engine.chat("When was it released?")
    assert "<Chat History>\nu:Who directed Inception? | a:Inception came out in 2010 [1].\n" in condense.prompts[0]


def test_trigger_skips_llm_for_self_contained(retriever: Any, store: Any) -> None:
    llm, condense = ScriptedLLM.fixed("ok"), ScriptedLLM.fixed(REWRITE)
    engine = make(retriever, store, llm, condense)
    engine.chat("Who directed Inception?")
    resp = engine.chat("What is the capital city of France today?")
    assert condense.call_count == 0
    assert resp.metadata["turn"].rewrite_skipped_reason == "trigger: self-contained"
    engine.chat("When was it built?")
    assert condense.call_count == 1


def test_rewrite_failure_falls_back_and_records(retriever: Any, store: Any) -> None:
    condense = ScriptedLLM.fixed(REWRITE, fail_on_call=0)
    engine = make(retriever, store, condense=condense, rewrite={"trigger": None})
    engine.chat("Who directed Inception?")
    resp = engine.chat("When was it released?")
    record = resp.metadata["turn"]
    assert record.retrieval_query == "When was it released?"
    assert record.rewrite_fallback_reason == "rewrite failed: ScriptedFailure: scripted failure on call 0"
    assert record.status == "complete"


def test_failed_turn_keeps_user_message_and_error_placeholder(retriever: Any, store: Any) -> None:
    engine = make(retriever, store, ScriptedLLM.fixed("x", fail_on_call=0))
    with pytest.raises(ScriptedFailure):
        engine.chat("Who directed Inception?")
    [user, assistant] = store.get_conversation("conv")
    assert (user.content, user.status) == ("Who directed Inception?", "complete")
    assert (assistant.status, assistant.error) == ("error", "ScriptedFailure: scripted failure on call 0")
    assert store.list_turn_records("conv")[0]["status"] == "error"
    assert [m.content for m in engine.chat_history] == ["Who directed Inception?"]


def test_citations_by_message_id_after_reopen(retriever: Any, tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    resp = make(retriever, SQLiteConversationStore(path)).chat("Who directed Inception?")
    mid = resp.metadata["message_id"]
    reopened = SQLiteConversationStore(path)
    cites = reopened.get_citations(mid)
    assert [c.node_id for c in cites] == [n.node.node_id for n in resp.source_nodes]
    assert [c.marker for c in cites] == [None, None, None] and cites[0].score == resp.source_nodes[0].score
    assert all(m.additional_kwargs == {} for m in make(retriever, reopened).chat_history)
    assert reopened.get_turn_record(mid)["citations"][0]["node_id"] == "inception"


class _CitingSynth:
    """Wraps core's synthesizer and adds metadata citations like ours does."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.inner = get_response_synthesizer(llm=llm)

    def synthesize(self, query: Any, nodes: List[NodeWithScore], **kw: Any) -> Response:
        resp = self.inner.synthesize(query, nodes)
        resp.metadata = {"citations": [{"marker": 1, "node_id": nodes[1].node.node_id, "source_index": 1}]}
        return resp

    def get_prompts(self) -> dict:
        return self.inner.get_prompts()


def test_synthesizer_citations_are_used(tmp_path: Path) -> None:
    nodes = [NodeWithScore(node=TextNode(id_=k, text=k), score=s) for k, s in (("a", 0.9), ("b", 0.8))]
    llm = ScriptedLLM.fixed("b [1]")
    store = SQLiteConversationStore(tmp_path / "c.db")
    engine = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes), llm, synthesizer=_CitingSynth(llm),  # type: ignore
                                             conversation_store=store)
    mid = engine.chat("which one?").metadata["message_id"]  # ("b" for "what is b?" restates the question)
    [cite] = store.get_citations(mid)
    assert (cite.node_id, cite.marker, cite.source_index, cite.score) == ("b", 1, 1, 0.8)


def test_chat_history_reset_and_seeded_history(retriever: Any, store: Any) -> None:
    engine = make(retriever, store, chat_history=[ChatMessage(role="user", content="hi"),
                                                  ChatMessage(role="assistant", content="hello")])
    engine.chat("Who directed Inception?")
    assert [m.content for m in engine.chat_history][:3] == ["hi", "hello", "Who directed Inception?"]
    engine.reset()
    assert engine.chat_history == [] and engine.conversation_id != "conv"
    assert len(store.get_conversation("conv")) == 4  # nothing deleted


def test_achat_twin(retriever: Any, store: Any) -> None:
    llm, condense = ScriptedLLM.fixed("Nolan."), ScriptedLLM.fixed(REWRITE)
    engine = make(retriever, store, llm, condense, rewrite={"trigger": None})

    async def run() -> Any:
        await engine.achat("Who directed Inception?")
        return await engine.achat("When was it released?")

    resp = asyncio.run(run())
    assert (condense.call_count, llm.call_count, resp.response) == (1, 2, "Nolan.")
    assert resp.metadata["turn"].retrieval_query == REWRITE
    assert [r["status"] for r in store.list_turn_records("conv")] == ["complete", "complete"]


def test_instrumentation_events_and_span(retriever: Any, store: Any) -> None:
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    handler, spans = EventCollector(events=[]), SimpleSpanHandler()
    root = get_dispatcher()
    root.add_event_handler(handler)
    root.add_span_handler(spans)
    try:
        make(retriever, store).chat("Who directed Inception?")
    finally:
        root.event_handlers.remove(handler)
        root.span_handlers.remove(spans)
    names = [e.class_name() for e in handler.events if e.class_name().startswith(("Chat", "Question", "Context"))]
    assert names == ["ChatTurnStartEvent", "QuestionRewriteEvent", "ContextTrimEvent", "ChatTurnEndEvent"]
    [chat] = [s for s in spans.completed_spans if s.id_.startswith("ConvRAGChatEngine.chat-")]
    synthesize = [s for s in spans.completed_spans if ".synthesize-" in s.id_]
    assert len(synthesize) == 1 and synthesize[0].parent_id == chat.id_  # nested as before


def test_validation(retriever: Any, store: Any) -> None:
    with pytest.raises(ValueError, match=r"BudgetOptions.max_tokens_limit must be an int >= 0 or None, got -1"):
        BudgetOptions(max_tokens_limit=-1)
    with pytest.raises(TypeError, match=r"from_defaults does not take \['bogus'\] \(bogus: unknown\); accepted: "):
        make(retriever, store, bogus=1)
    with pytest.raises(TypeError, match=r"budget must be a BudgetOptions \(or None\), got dict"):
        make(retriever, store, budget={"ratio": 0.5})


def test_eight_threads_fifty_turns_through_the_engine(tmp_path: Path) -> None:
    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=f"passage {i}"), score=1.0) for i in range(3)]
    store = SQLiteConversationStore(tmp_path / "threads.db")
    llm = ScriptedLLM.fixed("answer [1]")
    retriever = FixedRetriever(nodes)
    errors: List[BaseException] = []

    def worker(t: int) -> None:
        engine = ConvRAGChatEngine.from_defaults(retriever, llm, conversation_store=store, conversation_id=f"c{t}",
                                                 rewrite=RewriteOptions(strategy="concat"),
                                                 answer=AnswerOptions(citations=False))
        try:
            for i in range(50):
                engine.chat(f"thread {t} question {i}")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    run_threads(worker, 8)
    assert errors == []
    reopened = SQLiteConversationStore(tmp_path / "threads.db")
    for t in range(8):
        msgs = reopened.get_conversation(f"c{t}")
        assert [m.content for m in msgs if m.role == "user"] == [f"thread {t} question {i}" for i in range(50)]
        answers = [m for m in msgs if m.role == "assistant"]
        assert len(answers) == 50 and all(m.status == "complete" and m.content == "answer [1]" for m in answers)
        assert all(len(reopened.get_citations(a.id)) == 3 for a in answers)
        assert len(reopened.list_turn_records(f"c{t}")) == 50


def test_from_defaults_builds_our_synthesizers(retriever: Any, store: Any) -> None:
    """Issue 11 bug 6. One product, one factory: without synthesizer= the engine answers with ours (core's before)."""
    from llama_index_convrag.synthesizers import BaseSynthesizer as OurSynthesizer

    engine = make(retriever, store, answer={"response_mode": "refine", "citations": True, "citation_mode": "inline"})
    assert isinstance(engine._synthesizer, OurSynthesizer) and isinstance(engine._streaming_synthesizer,
                                                                           OurSynthesizer)
    assert engine._synthesizer.mode == "refine" and engine._streaming_synthesizer._streaming
    resp = engine.chat("Who directed Inception?")
    assert [c["marker"] for c in resp.metadata["citations"]] == [1]  # ours maps the [1] marker


def test_query_engine_answers_the_rewritten_question(retriever: Any, store: Any) -> None:
    from llama_index.core.query_engine import RetrieverQueryEngine

    from llama_index_convrag.synthesizers import get_response_synthesizer as ours

    llm, condense = ScriptedLLM.fixed("In 2010 [1]."), ScriptedLLM.fixed(REWRITE)
    query_engine = RetrieverQueryEngine(retriever, ours(llm=llm, citations=True))
    engine = ConvRAGChatEngine.from_defaults(query_engine=query_engine, llm=condense, conversation_store=store,
                                             conversation_id="conv", rewrite=RewriteOptions(trigger=None))
    engine.chat("Who directed Inception?")
    resp = engine.chat("When was it released?")
    assert (condense.call_count, llm.call_count, resp.response) == (1, 2, "In 2010 [1].")
    assert REWRITE in llm.prompts[-1] and "When was it released?" not in llm.prompts[-1]
    record = resp.metadata["turn"]
    assert record.retrieval_query == record.synthesis_query == REWRITE
    assert record.retrieved_ids == {"final": [n.node.node_id for n in resp.source_nodes]}
    assert record.retrieved_ids["final"][0] == "inception"
    [cite] = store.get_citations(resp.metadata["message_id"])
    assert (cite.marker, cite.node_id) == (1, "inception")


def test_core_argument_names(retriever: Any, store: Any) -> None:
    from llama_index.core.memory import ChatMemoryBuffer
    from llama_index.core.prompts import PromptTemplate

    condense = ScriptedLLM.fixed(REWRITE)
    memory = ChatMemoryBuffer.from_defaults(chat_history=[ChatMessage(role="user", content="Who made Inception?"),
                                                          ChatMessage(role="assistant", content="Nolan.")])
    engine = make(retriever, store, condense=condense, memory=memory, answer={"return_source_nodes": False},
                  condense_question_prompt=PromptTemplate("H={chat_history} Q={question}"), rewrite={"trigger": None})
    resp = engine.chat("When was it released?")
    assert condense.prompts == ["H=user: Who made Inception?\nassistant: Nolan. Q=When was it released?"]
    assert resp.source_nodes == [] and resp.sources == []
    skip = make(retriever, store, condense=condense, rewrite={"strategy": "none"})
    assert skip.chat("And it?").metadata["turn"].rewrite_skipped_reason == "strategy none"
    with pytest.raises(TypeError, match=r"from_defaults does not take \['similarity_top_k'\] \(similarity_top_k: "
                                        r"unknown\); accepted: \['retriever', 'llm', 'query_engine'"):
        make(retriever, store, similarity_top_k=3)
    with pytest.raises(ValueError, match=r"\['system_prompt'\] shape the answers of chat_mode"):
        make(retriever, store, system_prompt="Be brief.")


def test_llm_none_retrieval_only_extractive_turns(retriever: Any, store: Any, embed_model: Any) -> None:
    engine = ConvRAGChatEngine.from_defaults(retriever, None, answer=AnswerOptions(embed_model=embed_model),
                                             conversation_store=store, conversation_id="conv")
    assert engine._synthesizer.mode == "extractive" and engine._rewriter.strategy == "contextual"
    assert isinstance(engine._retriever, ConversationalRetriever) and engine._retriever.retriever is retriever
    first = engine.chat("Who directed Inception?")
    assert "Inception is a 2010 science fiction film directed by Christopher Nolan. [1]" in first.response
    assert first.metadata["trim_report"] is None and first.metadata["turn"].retrieved_ids["final"][0] == "inception"
    second = engine.chat("And when was it released?")
    record = second.metadata["turn"]
    # the extractive answer is the one sentence that answers (Nolan named once, an answer term: too light to join);
    # 'it' after a who-question is the film, not the person the answer named
    assert first.response == "Inception is a 2010 science fiction film directed by Christopher Nolan. [1]"
    assert record.retrieval_query == "And when was it released? directed Inception"
    assert [(a["term"], a["reason"]) for a in record.rewrite_explanation["added_terms"]] == [
        ("Inception", "proper noun in the question 1 turn(s) back"),
        ("directed", "content word in the question 1 turn(s) back")]
    assert "referent" not in record.rewrite_explanation
    assert set(record.retrieved_ids["final"][:2]) == {"inception", "nolan"}  # 'released' is in Nolan's passage
    stored = store.get_citations(second.metadata["message_id"])
    assert [c.marker for c in stored] == [c["marker"] for c in second.metadata["citations"]] and stored
    assert [(m.role, m.status) for m in store.get_conversation("conv")] == [("user", "complete"),
                                                                           ("assistant", "complete")] * 2


def test_contextual_fusion_searches_the_question_and_the_expansion(store: Any, embed_model: Any) -> None:
    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=f"passage {i}"), score=1.0 - i / 10) for i in range(3)]
    fixed = FixedRetriever(nodes)
    engine = ConvRAGChatEngine.from_defaults(fixed, None, answer=AnswerOptions(embed_model=embed_model),
                                             conversation_store=store, conversation_id="conv",
                                             rewrite=RewriteOptions(strategy="auto"))
    engine.chat("Who directed Inception?")
    engine.chat("Is it long?")
    engine.chat("Why do volcanoes erupt underwater?")  # a new subject: nothing added, one search
    assert fixed.queries == ["Who directed Inception?", "Is it long?", "Is it long? directed Inception",
                             "Why do volcanoes erupt underwater?"]
    record = engine.chat("When did it erupt last?").metadata["turn"]
    assert record.rewrite_explanation["reason"].startswith("needs context (pronoun 'it'); ")
    # no 'passage n' mentions a volcano: the expansion weighs double. The fixed retriever returns its 3 passages for
    # any query, so the two lists' agreement cannot be told from chance: no agreement factor
    fusion = record.rewrite_explanation["fusion"]
    assert fusion == {"question": 1.0, "context": 2 * record.rewrite_explanation["weights"]["context"],
                      "coverage": 0.0, "agreement": None, "own_top_kept": False}
    assert [a["term"] for a in record.rewrite_explanation["added_terms"]] == ["underwater", "volcanoes"]
    alone = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes), None, answer=AnswerOptions(embed_model=embed_model),
                                            conversation_store=store, rewrite=RewriteOptions(fusion=False))
    assert not isinstance(alone._retriever, ConversationalRetriever)
    alone.chat("Who directed Inception?")
    alone.chat("Is it long?")
    assert alone._retriever.queries == ["Who directed Inception?", "Is it long? directed Inception"]


def test_contextual_reads_the_opening_turn_beyond_last_n_turns(store: Any, embed_model: Any) -> None:
    fixed = FixedRetriever([NodeWithScore(node=TextNode(id_="n", text="passage"), score=1.0)])
    engine = ConvRAGChatEngine.from_defaults(fixed, None, answer=AnswerOptions(embed_model=embed_model),
                                             conversation_store=store, conversation_id="conv",
                                             rewrite=RewriteOptions(last_n_turns=1))
    for question in ["Tell me about the Mariana Trench.", "How deep is it?", "Who explored it first?",
                     "When was that?"]:
        engine.chat(question)
    record = engine.chat("Are there fish there?").metadata["turn"]
    assert "Mariana" in record.retrieval_query  # the opening subject, four turns back (anchor weight)


def test_llm_none_failed_turn_keeps_user_message(store: Any, embed_model: Any) -> None:
    class Broken(FixedRetriever):
        def _retrieve(self, query_bundle: Any) -> Any:
            raise ConnectionError("milvus down")

    engine = ConvRAGChatEngine.from_defaults(Broken([]), None, answer=AnswerOptions(embed_model=embed_model),
                                             conversation_store=store, conversation_id="conv")
    with pytest.raises(ConnectionError):
        engine.chat("Who directed Inception?")
    [user, assistant] = store.get_conversation("conv")
    assert (user.content, assistant.status, assistant.error) == ("Who directed Inception?", "error",
                                                                 "ConnectionError: milvus down")


def test_context_mode_answers_with_history_under_the_budget(retriever: Any, store: Any) -> None:
    """chat_mode='context': no rewrite; the LLM sees the context system message, the kept turns, the user's words."""
    llm = ScriptedLLM.fixed("Nolan directed it [1].", chat_model=True)
    heavy_pads = lambda text: sum(1000 if w == "pad" else 1 for w in text.split())  # noqa: E731
    engine = ConvRAGChatEngine.from_defaults(retriever, llm, chat_mode="context", system_prompt="Be brief.",
                                             answer=AnswerOptions(context_prompt="Context:\n{context_str}\n",
                                                                  citations=False),
                                             conversation_store=store, conversation_id="conv",
                                             budget=BudgetOptions(count_tokens=heavy_pads),
                                             chat_history=[ChatMessage(role="user", content="pad pad pad pad"),
                                                           ChatMessage(role="assistant", content="Noted.")])
    engine.chat("Who directed Inception?")
    resp = engine.chat("And when was it released?")
    record = resp.metadata["turn"]
    assert (record.rewrite_strategy, record.rewrite_skipped_reason) == ("none", "strategy none")
    assert record.retrieval_query == record.synthesis_query == "And when was it released?"
    system, *turns = llm.calls[-1].messages
    assert system.role == "system" and system.content.startswith("Context:\n") and system.content.endswith("Be brief.")
    assert "Inception is a 2010 science fiction film" in system.content
    assert [(m.role, m.content) for m in turns] == [
        ("user", "Who directed Inception?"), ("assistant", "Nolan directed it [1]."),
        ("user", "And when was it released?")]
    assert [d["section"] for d in resp.metadata["trim_report"].to_dict()["dropped"]] == ["history"]


def test_a_short_switch_to_a_new_subject_keeps_its_own_results_first(retriever: Any, store: Any,
                                                                      embed_model: Any) -> None:
    engine = ConvRAGChatEngine.from_defaults(retriever, None, answer=AnswerOptions(embed_model=embed_model),
                                             conversation_store=store, conversation_id="conv")
    engine.chat("Who directed Inception?")
    record = engine.chat("How are documents ranked?").metadata["turn"]  # two words, both new: a light prior
    assert record.rewrite_explanation["reason"] == (
        "looks self-contained; only words new to the conversation: history as a light prior")
    assert record.rewrite_explanation["weights"]["context"] == 0.3
    assert record.retrieved_ids["final"][0] == "bm25"


class LoggingHook:
    """An answer hook that logs its scope and names a record field."""

    def __init__(self, log: list, fields: dict) -> None:
        self.log, self.fields = log, fields

    @contextmanager
    def scope(self, assistant_message_id: str):
        self.log.append(("enter", assistant_message_id))
        yield
        self.log.append(("exit", assistant_message_id))

    def record_fields(self, response: Any) -> dict:
        self.log.append(("fields", type(response).__name__))
        return self.fields


def test_answer_hooks_run_around_every_answer_and_set_record_fields(store: Any, embed_model: Any) -> None:
    nodes = [NodeWithScore(node=TextNode(id_="n0", text="Inception is a 2010 film."), score=1.0)]
    plain = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes), None, answer=AnswerOptions(embed_model=embed_model),
                                            conversation_store=store, conversation_id="hooked")
    log: list = []
    tree = {"root": "from the hook"}
    hooked = ConvRAGChatEngine(rewriter=plain._rewriter, port=StoreTurnPort(store), conversation_id="hooked",
                               retriever=plain._retriever, synthesizer=plain._synthesizer,
                               answer=AnswerOptions(hooks=[LoggingHook(log, {"judge_tree": tree})]))
    response = hooked.chat("What is Inception?")
    mid = response.metadata["message_id"]
    assert log == [("enter", mid), ("exit", mid), ("fields", "Response")]
    assert response.metadata["judge_tree"] == tree and store.get_turn_record(mid)["judge_tree"] == tree
    bad = ConvRAGChatEngine(rewriter=plain._rewriter, port=StoreTurnPort(store), conversation_id="bad",
                            retriever=plain._retriever, synthesizer=plain._synthesizer,
                            answer=AnswerOptions(hooks=[LoggingHook([], {"colour": "red"})]))
    with pytest.raises(ValueError, match="answer hook LoggingHook set 'colour', which is not a TurnRecord field"):
        bad.chat("What is Inception?")
    assert [(m.role, m.status) for m in store.get_conversation("bad")] == [("user", "complete"),
                                                                                ("assistant", "error")]
    with pytest.raises(TypeError, match=r"AnswerOptions.hooks must provide scope\(\) and record_fields\(\) "
                                        r"\(AnswerHook\)"):
        AnswerOptions(hooks=[object()])  # type: ignore[list-item]


def test_a_hook_given_to_from_defaults_runs(store: Any) -> None:
    """The documented extension point: ``from_defaults(retriever, llm, answer=AnswerOptions(hooks=[hook]))``."""
    log: list = []
    nodes = [NodeWithScore(node=TextNode(id_="n0", text="Inception is a 2010 film."), score=1.0)]
    engine = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes), ScriptedLLM.fixed("It is a 2010 film."),
                                             conversation_store=store,
                                             answer=AnswerOptions(hooks=[LoggingHook(log, {})]))
    mid = engine.chat("What is Inception?").metadata["message_id"]
    assert log == [("enter", mid), ("exit", mid), ("fields", "Response")]
