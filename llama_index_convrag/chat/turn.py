"""One chat turn: :class:`Turn` owns the turn's state and the steps that change it.

The engine tells the story (begin -> rewrite -> retrieve -> fit the budget -> answer -> finish); each step that only
touches the turn is a method here, and the pure helpers below are shared by the sync, async and streaming paths.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.chat_engine.types import AgentChatResponse
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms.llm import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore
from llama_index.core.tools import ToolOutput

from llama_index_convrag.config.output_watch import IncompleteAnswer, OutputWatch
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.chat.blocks import BlockReport
from llama_index_convrag.chat.budget import TrimReport
from llama_index_convrag.chat.memory_step import MemoryFit
from llama_index_convrag.chat.fallback import (DEFAULT_ECHO_RULES, ECHO, ECHO_WARNING, LLM as LLM_ANSWER, NO_LLM,
                                               RETRY, AnswerRule, EchoRules, Recovered, no_answer, passages_of)
from llama_index_convrag.chat.events import ChatTurnEndEvent, ChatTurnStartEvent, ContextTrimEvent, QuestionRewriteEvent
from llama_index_convrag.chat.records import TurnRecord
from llama_index_convrag.conversational.query import ConversationalQuery
from llama_index_convrag.conversational.rewrite import RewriteResult
from llama_index_convrag.chat.port import TurnContext, TurnOutcome
from llama_index_convrag.chat.stream_pipeline import TurnStream
from llama_index_convrag.chat.streaming import ConvRAGStreamingResponse
from llama_index_convrag.instrumentation import emit
from llama_index_convrag.memory.conversation import LoadedMemory
from llama_index_convrag.postprocessors.model_rerank import FALLBACK_KEY
from llama_index_convrag.postprocessors.widen import citation_excerpt
from llama_index_convrag.rank_trail import get_trail
from llama_index_convrag.storage.conversation._sql import DEFAULT_OWNER
from llama_index_convrag.storage.conversation.base import Citation
from llama_index_convrag.synthesizers.citations import has_answer_text
from llama_index_convrag.synthesizers.completion import COMPLETION_KEY
from llama_index_convrag.synthesizers.grounding import SupportScorer, grounding_record
from llama_index_convrag.synthesizers.stream_hold import GROUNDING_KEY

dispatcher = get_dispatcher(__name__)
logger = logging.getLogger(__name__)
Stages = Dict[str, List[NodeWithScore]]


@dataclass
class Turn:
    """The state of one turn: its record (persisted), the history it conditions on (``history`` for the rewrite,
    ``answer_history``: the turns the budget kept for the answer) and the surviving nodes."""

    record: TurnRecord
    history: List[ChatMessage]
    history_ids: Optional[List[str]]
    answer_history: List[ChatMessage] = field(default_factory=list)
    nodes: List[NodeWithScore] = field(default_factory=list)
    trim: Union[None, TrimReport, BlockReport] = None
    owner: str = DEFAULT_OWNER
    memory: Optional[LoadedMemory] = None  # loaded by the port, recalled after the rewrite
    memory_text: str = ""  # the kept memory blocks, where the chat mode puts context
    plain_query: Optional[str] = None  # the synthesizer's query without the memory (what answers are checked by)
    rewrite: Optional[RewriteResult] = None
    recovered: Optional[Recovered] = None  # the answer shown instead of an empty or marker-only one
    output: OutputWatch = field(default_factory=OutputWatch)  # how the answer step's LLM calls finished

    @classmethod
    def start(cls, context: TurnContext) -> "Turn":
        """The turn the port loaded (the user message and the ``pending`` placeholder are stored): open its
        record."""
        request, user, placeholder = context.request, context.user, context.placeholder
        record = TurnRecord(conversation_id=request.conversation_id, user_message_id=user.id,
                            assistant_message_id=placeholder.id, original_question=request.question,
                            streaming=request.streaming, started_at=time.time())
        emit(dispatcher, lambda: ChatTurnStartEvent(conversation_id=request.conversation_id, user_message_id=user.id,
                                                    assistant_message_id=placeholder.id, question=request.question))
        return cls(record=record, history=context.history, history_ids=context.history_ids, owner=request.owner,
                   memory=context.memory)

    @property
    def question(self) -> str:
        return self.record.original_question

    @property
    def retrieval_query(self) -> str:
        """The rewritten question, or the user's words before (or without) a rewrite."""
        query = self.record.retrieval_query
        return query if query is not None else self.record.original_question

    def retrieval_bundle(self) -> ConversationalQuery:
        """This turn's retrieval query, carrying the rewrite's plan (a fusing retriever reads it and writes its
        decision back: :meth:`apply_fusion`)."""
        return ConversationalQuery(self.retrieval_query, plan=self.rewrite.plan if self.rewrite is not None else None)

    def apply_rewrite(self, result: RewriteResult) -> None:
        self.rewrite = result
        rec = self.record
        rec.retrieval_query, rec.rewrite_strategy, rec.rewrite_used_llm = result.query, result.strategy, result.used_llm
        rec.rewrite_latency_ms, rec.rewrite_cache_hit = result.latency_ms, result.cache_hit
        rec.rewrite_fallback_reason, rec.rewrite_skipped_reason = result.fallback_reason, result.skipped_reason
        rec.rewrite_explanation = result.explanation
        if result.fallback_reason is not None:
            logger.warning("question rewrite fell back to the original question: %s", result.fallback_reason)
        emit(dispatcher, lambda: QuestionRewriteEvent(
            question=rec.original_question, retrieval_query=result.query, strategy=result.strategy,
            used_llm=result.used_llm, latency_ms=result.latency_ms, fallback_reason=result.fallback_reason,
            skipped_reason=result.skipped_reason, explanation=rec.rewrite_explanation))

    def apply_fusion(self, fusion: Optional[Dict[str, Any]]) -> None:
        """Add the fusion decision (``ConversationalQuery.fusion``, set by a fusing retriever: weights, coverage,
        agreement of the two lists, whether the question's own first result was kept first) to the rewrite
        explanation."""
        if fusion is not None and self.record.rewrite_explanation is not None:
            self.record.rewrite_explanation["fusion"] = {
                k: round(v, 3) if isinstance(v, float) else v for k, v in fusion.items()}

    def apply_stages(self, stages: Stages) -> None:
        """Record the node ids of every retrieval stage; the last stage's nodes go on. A reranker that failed (its
        nodes carry ``FALLBACK_KEY``: the incoming order was kept) is named in the record's ``warnings``."""
        self.record.retrieved_ids = {k: [n.node.node_id for n in v] for k, v in stages.items()}
        self.nodes = list(stages[list(stages)[-1]])
        failed = next((n.node.metadata[FALLBACK_KEY] for n in self.nodes if FALLBACK_KEY in n.node.metadata), None)
        if failed is not None:
            self.record.warnings.append(f"rerank failed, the retrieval order was kept: {failed}")

    def apply_sources(self, nodes: Sequence[NodeWithScore]) -> None:
        """The nodes an answer was given from, when something other than this turn retrieved them."""
        self.nodes = list(nodes)
        self.record.retrieved_ids["final"] = [final_doc_id(n) for n in self.nodes]

    def apply_trim(self, report: Union[None, TrimReport, BlockReport]) -> None:
        """Keep the chunks the budget kept (all of them without a budget) and record the final context."""
        if report is not None:
            self.trim = report
            self.record.trim_report = report.to_dict()
            logger.debug("context budget for turn %s: %s", self.record.assistant_message_id, self.record.trim_report)
            emit(dispatcher, lambda: ContextTrimEvent(report=self.record.trim_report))
            self.nodes = [self.nodes[i] for i in report.kept_chunks]
        self.record.retrieved_ids["budget"] = [n.node.node_id for n in self.nodes]
        self.record.retrieved_ids["final"] = [final_doc_id(n) for n in self.nodes]

    def apply_memory_fit(self, fit: MemoryFit) -> None:
        """Keep what the one budget kept (chunks, history turns, memory items) and record the turn's memory and its
        assembled context (:class:`~.memory_step.MemoryFit`)."""
        self.memory_text = fit.memory_text
        self.apply_trim(fit.report)
        if self.memory is not None:
            self.record.memory = {**self.memory.to_record(), "recalled_kept": fit.kept_positions()}
        self.record.context = fit.context_record()

    def memory_skipped(self, reason: str) -> None:
        """Memory is on but this turn read none (no prompt to hold it, or a port that loaded none): say why."""
        self.record.memory = {"skipped": {"all": reason}}

    def checked_query(self, query: str) -> str:
        """The query an answer is checked against (an echo, the extractive fallback): ``query`` without the
        memory blocks."""
        return self.plain_query if self.plain_query is not None else query

    def apply_hooks(self, hooks: Sequence[Any], response: Any) -> None:
        """Set the record fields each answer hook names (``AnswerHook.record_fields``; the judge: ``judge_tree``)."""
        for hook in hooks:
            for name, value in hook.record_fields(response).items():
                if not hasattr(self.record, name):
                    raise ConfigurationError(f"answer hook {type(hook).__name__} set {name!r}, which is not a "
                                             f"TurnRecord field")
                setattr(self.record, name, value)

    def begin_answer(self, llm_writes: bool) -> None:
        """The answer about to be written is the LLM's (``llm``) or not (``no_llm``)."""
        self.record.answer_source = LLM_ANSWER if llm_writes else NO_LLM

    def answer_rule(self, question: Optional[str], rules: EchoRules = DEFAULT_ECHO_RULES) -> Optional[AnswerRule]:
        """The stream hold's rule for this turn's answer (:class:`~.fallback.AnswerRule`, checked against
        ``question`` under ``rules``), or None when the answer is not the LLM's or has no passages (nothing to recover from)."""
        if self.record.answer_source != LLM_ANSWER or not self.nodes:
            return None
        return AnswerRule(question, rules)

    def recovery_reason(self, text: str, query: Optional[str],
                        rules: EchoRules = DEFAULT_ECHO_RULES) -> Optional[str]:
        """Why ``text``, the LLM's answer over this turn's passages to ``query``, is recovered
        (``fallback.no_answer``: empty or only citation markers, or ``query`` restated; None: not checked for that);
        None when it is shown."""
        if self.record.answer_source != LLM_ANSWER or not self.nodes:
            return None
        return no_answer(text, query, rules)

    def apply_recovered(self, recovered: Recovered, reason: str, text: str) -> str:
        """Show ``recovered`` instead of the LLM's answer ``text`` (its citations become the turn's); its text. An
        answer that restated the question is named in the record's ``warnings``."""
        self.recovered = recovered
        self.record.answer_source = recovered.source
        if reason == ECHO:
            self.record.warnings.append(ECHO_WARNING.format(answer=text.strip()))
        return recovered.text

    def outcome(self, status: str, text: str, error: Optional[BaseException], response: Any,
                scorer: Optional[SupportScorer] = None) -> TurnOutcome:
        """The turn's final state as the port commits it: the answer, its citations, its grounding and the record.
        An answer the model cut at its output limit, or left empty, is stored as ``error`` with its text kept
        (:meth:`OutputWatch.problem`): the LLM's answer, or its retry (the last call watched); the extractive answer
        shown after an empty one (:meth:`apply_recovered`) is no LLM call's, so it is not judged by them. The
        grounding is the one judged while the answer was cited (``response.metadata["grounding"]``), else judged
        here, once (by ``scorer`` when given)."""
        rec = self.record
        by_llm = self.recovered is None or self.recovered.source == RETRY
        judged = status == "complete" and response is not None and by_llm
        problem = self.output.problem(text) if judged else None
        if problem is not None:
            status, error = "error", IncompleteAnswer(problem)
        rec.warnings.extend(self.output.earlier_truncations())
        rec.answer = text
        if rec.status != "no_docs" or status != "complete":
            rec.status = status
        rec.error = None if error is None else f"{type(error).__name__}: {error}"
        rec.finished_at = time.time()
        if self.recovered is not None:
            response = self.recovered.response
        metadata = getattr(response, "metadata", None) or {}
        if status == "complete" and rec.status != "no_docs" and self.nodes and has_answer_text(text):
            carried = metadata.get(GROUNDING_KEY)
            rec.grounding = carried if carried is not None else grounding_record(text, passages_of(self.nodes),
                                                                                 scorer=scorer)
        citations = build_citations(response, self.nodes) if response is not None else []
        rec.citation_mode = metadata.get("citation_mode")
        rec.answer_completion = metadata.get(COMPLETION_KEY)
        rec.citations[:] = [c.to_dict() for c in citations]  # in place: streamed metadata holds this list
        return TurnOutcome(rec.conversation_id, rec.assistant_message_id, content=text, status=status,
                           error=rec.error, citations=tuple(citations), record=rec.to_dict(), owner=self.owner,
                           user_message_id=rec.user_message_id)

    def ended(self) -> None:
        """The turn is committed: its end event."""
        rec = self.record
        emit(dispatcher, lambda: ChatTurnEndEvent(assistant_message_id=rec.assistant_message_id, status=rec.status,
                                                  error=rec.error))

    def metadata(self, generated_question: bool) -> Dict[str, Any]:
        """``response.metadata``: ``conversation_id``, ``message_id`` (assistant), ``user_message_id``, ``turn``
        (the TurnRecord), ``trim_report`` (TrimReport, None when no budget was applied), ``citations`` (dicts), and
        ``generated_question`` (the retrieval query) only when ``generated_question`` is True; ``judge_tree`` (dict) when
        the answer was judge-guided; ``memory`` (dict: the record's) when the turn read memory. With memory the
        ``trim_report`` is a :class:`~.blocks.BlockReport` (every block's tokens before and after, what was cut)."""
        rec = self.record
        meta: Dict[str, Any] = {
            "conversation_id": rec.conversation_id, "message_id": rec.assistant_message_id,
            "user_message_id": rec.user_message_id, "turn": rec, "trim_report": self.trim,
            "citations": rec.citations,
        }
        if generated_question:
            meta["generated_question"] = rec.retrieval_query
        if rec.judge_tree is not None:
            meta["judge_tree"] = rec.judge_tree
        if rec.memory is not None:
            meta["memory"] = rec.memory
        return meta

    def chat_response(self, text: str, response: Any, *, sources: bool,
                      generated_question: bool) -> AgentChatResponse:
        """The response of ``chat``/``achat``; ``sources=False`` leaves out source nodes and tool outputs."""
        tools = [] if not sources or response is None else [ToolOutput(
            content=text, tool_name="convrag_chat", raw_input={"query": self.record.synthesis_query},
            raw_output=response)]
        return AgentChatResponse(response=text, sources=tools, source_nodes=list(self.nodes) if sources else [],
                                 metadata=self.metadata(generated_question))

    def stream_response(self, stream: TurnStream, *, is_async: bool, sources: bool,
                        generated_question: bool) -> ConvRAGStreamingResponse:
        """The response of ``stream_chat``/``astream_chat`` over the turn's pipeline."""
        rec = self.record
        return ConvRAGStreamingResponse(
            source_nodes=list(self.nodes) if sources else [], message_id=rec.assistant_message_id,
            user_message_id=rec.user_message_id, conversation_id=rec.conversation_id,
            metadata=self.metadata(generated_question), stream=stream, is_async=is_async)


# --- pure helpers -------------------------------------------------------------------------------------------------
def final_doc_id(nws: NodeWithScore) -> str:
    """The document id evaluation scores a context node by: its ``ref_doc_id``, else its node id."""
    ref = nws.node.ref_doc_id
    return ref if ref is not None else nws.node.node_id


def stage_names(postprocessors: Sequence[BaseNodePostprocessor]) -> List[Tuple[str, BaseNodePostprocessor]]:
    """``(stage name, postprocessor)``: the class name, suffixed ``#2``... when repeated."""
    seen: Dict[str, int] = {}
    out = []
    for pp in postprocessors:
        name = type(pp).__name__
        seen[name] = seen.get(name, 0) + 1
        out.append((name if seen[name] == 1 else f"{name}#{seen[name]}", pp))
    return out


def group_turns(history: Sequence[ChatMessage]) -> List[List[ChatMessage]]:
    """Split history into turns; a turn starts at each user message (leading non-user messages form one turn)."""
    turns: List[List[ChatMessage]] = []
    for m in history:
        if m.role == MessageRole.USER or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns


def system_text(synthesizer: Any, llm: LLM) -> str:
    """The synthesizer's QA template without its variables (the fixed prompt text to budget for)."""
    try:  # _get_prompts: this level only, without get_prompts' deep copies of every sub-module
        getter = getattr(synthesizer, "_get_prompts", None)
        prompts = getter() if getter is not None else synthesizer.get_prompts()
    except Exception:  # noqa: BLE001 - a synthesizer without PromptMixin: nothing to count
        return ""
    for key, prompt in prompts.items():
        if key.endswith("text_qa_template"):
            try:
                template = prompt.get_template(llm=llm)
            except TypeError:
                template = prompt.get_template()
            return template.replace("{context_str}", "").replace("{query_str}", "")
    return ""


def read_text(response: Any) -> str:
    """The whole text of a (streaming or plain) response."""
    if isinstance(response, StreamingResponse) and response.response_gen is not None:
        return "".join(response.response_gen)
    return str(response)


async def aread_text(response: Any) -> str:
    """Async twin of :func:`read_text`."""
    if isinstance(response, AsyncStreamingResponse):
        return "".join([d async for d in response.async_response_gen()])
    return read_text(response)


def _get(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def build_citations(response: Any, nodes: Sequence[NodeWithScore]) -> List[Citation]:
    """Citations from ``response.metadata['citations']`` (our synthesizer fills it, for streams when they end),
    else every source with marker None. ``source_index`` refers to the response's source nodes."""
    sources = list(getattr(response, "source_nodes", None) or nodes)
    metadata = getattr(response, "metadata", None) or {}
    raw = metadata.get("citations")
    if not raw:
        return [_citation(nws, i, None) for i, nws in enumerate(sources)]
    out = []
    for item in raw:
        index = _get(item, "source_index")
        if index is None or not 0 <= int(index) < len(sources):
            continue
        out.append(_citation(sources[int(index)], int(index), _get(item, "marker")))
    return out


def _citation(nws: NodeWithScore, index: int, marker: Optional[int]) -> Citation:
    text, span = citation_excerpt(nws.node)  # a widened passage: the matched chunk inside it, and where
    return Citation(node_id=nws.node.node_id, source_index=index, marker=None if marker is None else int(marker),
                    ref_doc_id=nws.node.ref_doc_id, score=None if nws.score is None else float(nws.score),
                    stage_scores=get_trail(nws), text=text, span=None if span is None else list(span))


__all__ = ["Turn", "aread_text", "build_citations", "final_doc_id", "group_turns", "read_text", "stage_names",
           "system_text"]
