"""``ConvRAGChatEngine``: condense-question conversational RAG with a persistent conversation store.

One turn: store the user message and an assistant placeholder -> rewrite the follow-up into a retrieval query
(retrieval only) -> retrieve -> postprocess (rerank) -> fit the token budget -> synthesize -> persist the answer,
its citations (bound to the assistant message id) and a replayable :class:`TurnRecord`.

Response metadata (``response.metadata`` for ``chat``/``achat``, the same dict on streamed responses):
``conversation_id``, ``message_id`` (assistant), ``user_message_id``, ``turn`` (TurnRecord), ``trim_report``
(TrimReport, None when nothing was synthesised), ``citations`` (list of dicts), and ``generated_question`` (the
retrieval query) only when ``return_generated_question=True``. The turn record always holds the retrieval query.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.base.response.schema import StreamingResponse
from llama_index.core.chat_engine.types import AgentChatResponse, BaseChatEngine
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms.llm import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.response_synthesizers import BaseSynthesizer
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.tools import ToolOutput

from llama_index_convrag.chat import turn as T
from llama_index_convrag.chat.budget import DEFAULT_BUDGET_RATIO, TokenCounter, TrimReport
from llama_index_convrag.chat.events import (
    ChatTurnEndEvent,
    ChatTurnStartEvent,
    ContextTrimEvent,
    QuestionRewriteEvent,
)
from llama_index_convrag.chat.records import TurnRecord
from llama_index_convrag.chat.rewrite import HistoryFormatter, QuestionRewriter, RewriteResult
from llama_index_convrag.chat.streaming import (
    ConvRAGStreamingResponse,
    Finalizer,
    astream_lifecycle,
    stream_lifecycle,
)
from llama_index_convrag.chat.triggers import needs_rewrite
from llama_index_convrag.prompts.chat import DEFAULT_ANSWER_QUERY_PROMPT
from llama_index_convrag.storage.conversation.base import ConversationStore

dispatcher = get_dispatcher(__name__)
logger = logging.getLogger(__name__)


@dataclass
class _Turn:
    record: TurnRecord
    history: List[ChatMessage]
    history_ids: Optional[List[str]]
    nodes: List[NodeWithScore] = field(default_factory=list)
    trim: Optional[TrimReport] = None
    rewrite: Optional[RewriteResult] = None


def final_doc_id(nws: NodeWithScore) -> str:
    """The document id evaluation scores a context node by: its ``ref_doc_id``, else its node id."""
    ref = nws.node.ref_doc_id
    return ref if ref is not None else nws.node.node_id


class ConvRAGChatEngine(BaseChatEngine, PromptMixin):
    """Condense-question chat engine. ``__init__`` takes built parts; :meth:`from_defaults` builds them."""

    def __init__(
        self,
        *,
        retriever: BaseRetriever,
        synthesizer: BaseSynthesizer,
        llm: LLM,
        rewriter: QuestionRewriter,
        store: ConversationStore,
        conversation_id: str,
        node_postprocessors: Sequence[BaseNodePostprocessor] = (),
        streaming_synthesizer: Optional[BaseSynthesizer] = None,
        rephrase_question: bool = True,
        return_generated_question: bool = False,
        return_source_nodes: bool = True,
        response_if_no_docs_found: Optional[str] = None,
        max_tokens_limit: Optional[int] = None,
        get_chat_history: Optional[HistoryFormatter] = None,
        answer_query_prompt: Optional[BasePromptTemplate] = None,
        budget_ratio: float = DEFAULT_BUDGET_RATIO,
        reserved_output_tokens: Optional[int] = None,
        count_tokens: Optional[TokenCounter] = None,
    ) -> None:
        if max_tokens_limit is not None and max_tokens_limit < 0:
            raise ValueError(f"max_tokens_limit must be >= 0, got {max_tokens_limit!r}")
        if reserved_output_tokens is not None and reserved_output_tokens < 0:
            raise ValueError(f"reserved_output_tokens must be >= 0, got {reserved_output_tokens!r}")
        if not 0 < budget_ratio <= 1:
            raise ValueError(f"budget_ratio must be in (0, 1], got {budget_ratio!r}")
        self._retriever = retriever
        self._synthesizer = synthesizer
        self._streaming_synthesizer = streaming_synthesizer
        self._llm = llm
        self._rewriter = rewriter
        self._store = store
        self.conversation_id = conversation_id
        self._postprocessors = list(node_postprocessors)
        self.rephrase_question = rephrase_question
        self.return_generated_question = return_generated_question
        self.return_source_nodes = return_source_nodes
        self.response_if_no_docs_found = response_if_no_docs_found
        self.max_tokens_limit = max_tokens_limit
        self._get_chat_history = get_chat_history if get_chat_history is not None else rewriter.get_chat_history
        self._answer_prompt = answer_query_prompt if answer_query_prompt is not None else DEFAULT_ANSWER_QUERY_PROMPT
        self.budget_ratio = budget_ratio
        num_output = llm.metadata.num_output
        self.reserved_output_tokens = (
            reserved_output_tokens if reserved_output_tokens is not None else (num_output if num_output > 0 else 256)
        )
        self._count_tokens = count_tokens if count_tokens is not None else rewriter.count_tokens

    @classmethod
    def from_defaults(
        cls,
        retriever: BaseRetriever,
        llm: LLM,
        *,
        condense_llm: Optional[LLM] = None,
        synthesizer: Optional[BaseSynthesizer] = None,
        streaming_synthesizer: Optional[BaseSynthesizer] = None,
        response_mode: str = "compact",
        node_postprocessors: Optional[Sequence[BaseNodePostprocessor]] = None,
        conversation_store: Optional[ConversationStore] = None,
        conversation_id: Optional[str] = None,
        chat_history: Optional[List[ChatMessage]] = None,
        rewrite_strategy: str = "llm",
        rewrite_trigger: bool = True,
        last_n_turns: int = 3,
        max_rewrite_history_tokens: int = 1024,
        condense_prompt: Optional[BasePromptTemplate] = None,
        get_chat_history: Optional[HistoryFormatter] = None,
        count_tokens: Optional[TokenCounter] = None,
        **engine_kwargs: Any,
    ) -> "ConvRAGChatEngine":
        """Build the rewriter, the synthesizers (core's, for ``response_mode``) and an in-memory store if absent.

        ``engine_kwargs`` are ``__init__``'s options (``rephrase_question``, ``return_generated_question``, ...).
        ``chat_history`` seeds the conversation in the store.
        """
        unknown = sorted(set(engine_kwargs) - ENGINE_OPTIONS)
        if unknown:
            raise TypeError(f"unknown ConvRAGChatEngine options {unknown}; accepted: {sorted(ENGINE_OPTIONS)}")
        from llama_index.core.response_synthesizers import get_response_synthesizer

        from llama_index_convrag.storage.conversation.sqlite import SQLiteConversationStore

        rewriter = QuestionRewriter(
            strategy=rewrite_strategy, llm=condense_llm if condense_llm is not None else llm,
            condense_prompt=condense_prompt, last_n_turns=last_n_turns,
            max_history_tokens=max_rewrite_history_tokens, trigger=needs_rewrite if rewrite_trigger else None,
            get_chat_history=get_chat_history, count_tokens=count_tokens,
        )
        if synthesizer is None:
            synthesizer = get_response_synthesizer(llm=llm, response_mode=response_mode)
            if streaming_synthesizer is None:
                streaming_synthesizer = get_response_synthesizer(llm=llm, response_mode=response_mode, streaming=True)
        store = conversation_store if conversation_store is not None else SQLiteConversationStore(":memory:")
        cid = conversation_id if conversation_id is not None else uuid.uuid4().hex
        if chat_history is not None:
            for message in chat_history:
                store.add_message(cid, message)
        return cls(
            retriever=retriever, synthesizer=synthesizer, streaming_synthesizer=streaming_synthesizer, llm=llm,
            rewriter=rewriter, store=store, conversation_id=cid,
            node_postprocessors=node_postprocessors if node_postprocessors is not None else (),
            get_chat_history=get_chat_history, count_tokens=count_tokens, **engine_kwargs,
        )

    # --- PromptMixin ---------------------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {"answer_query_prompt": self._answer_prompt}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "answer_query_prompt" in prompts_dict:
            self._answer_prompt = prompts_dict["answer_query_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {"rewriter": self._rewriter, "synthesizer": self._synthesizer}

    # --- state ---------------------------------------------------------------------------------------------------
    @property
    def store(self) -> ConversationStore:
        return self._store

    @property
    def chat_history(self) -> List[ChatMessage]:
        """User messages as written and complete answers of the current conversation."""
        return [m.to_chat_message() for m in self._store.history(self.conversation_id)]

    def reset(self) -> None:
        """Start a new conversation. The previous one stays in the store (nothing is deleted)."""
        self.conversation_id = uuid.uuid4().hex

    # --- sync ----------------------------------------------------------------------------------------------------
    @dispatcher.span
    def chat(self, message: str, chat_history: Optional[List[ChatMessage]] = None) -> AgentChatResponse:
        turn = self._begin(message, chat_history, streaming=False)
        try:
            self._gather(turn)
            query = self._synthesis_query(turn)
            if query is None:
                return self._chat_response(turn, self._finish_no_docs(turn), None)
            response = self._synthesizer.synthesize(query, turn.nodes)
            text = "".join(response.response_gen) if isinstance(response, StreamingResponse) else str(response)
        except Exception as e:
            self._finalize(turn, "error", "", e, None)
            raise
        self._finalize(turn, "complete", text, None, response)
        return self._chat_response(turn, text, response)

    @dispatcher.span
    def stream_chat(self, message: str, chat_history: Optional[List[ChatMessage]] = None) -> ConvRAGStreamingResponse:
        turn = self._begin(message, chat_history, streaming=True)
        holder: Dict[str, Any] = {}
        try:
            self._gather(turn)
            query = self._synthesis_query(turn)
            if query is None:
                deltas: Iterator[str] = iter([self._no_docs_reply()])
            else:
                holder["response"] = self._stream_synthesizer.synthesize(query, turn.nodes)
                deltas = T.sync_deltas(holder["response"])
        except Exception as e:
            self._finalize(turn, "error", "", e, None)
            raise
        finalizer = Finalizer(lambda s, text, e: self._finalize(turn, s, text, e, holder.get("response")))
        return self._stream_response(turn, finalizer, sync_stream=stream_lifecycle(deltas, finalizer))

    # --- async ---------------------------------------------------------------------------------------------------
    @dispatcher.span
    async def achat(self, message: str, chat_history: Optional[List[ChatMessage]] = None) -> AgentChatResponse:
        turn = self._begin(message, chat_history, streaming=False)
        try:
            await self._agather(turn)
            query = self._synthesis_query(turn)
            if query is None:
                return self._chat_response(turn, self._finish_no_docs(turn), None)
            response = await self._synthesizer.asynthesize(query, turn.nodes)
            text = await T.aread_text(response)
        except Exception as e:
            self._finalize(turn, "error", "", e, None)
            raise
        self._finalize(turn, "complete", text, None, response)
        return self._chat_response(turn, text, response)

    @dispatcher.span
    async def astream_chat(
        self, message: str, chat_history: Optional[List[ChatMessage]] = None
    ) -> ConvRAGStreamingResponse:
        turn = self._begin(message, chat_history, streaming=True)
        holder: Dict[str, Any] = {}
        try:
            await self._agather(turn)
            query = self._synthesis_query(turn)
            if query is None:
                deltas: AsyncIterator[str] = T.aiter_one(self._no_docs_reply())
            else:
                holder["response"] = await self._stream_synthesizer.asynthesize(query, turn.nodes)
                deltas = T.async_deltas(holder["response"])
        except Exception as e:
            self._finalize(turn, "error", "", e, None)
            raise
        finalizer = Finalizer(lambda s, text, e: self._finalize(turn, s, text, e, holder.get("response")))
        return self._stream_response(turn, finalizer, async_stream=astream_lifecycle(deltas, finalizer))

    # --- rewrite + retrieval: the only sync/async difference besides synthesis ------------------------------------
    def _gather(self, turn: _Turn) -> None:
        rec = turn.record
        self._on_rewrite(turn, self._rewriter.rewrite(rec.original_question, turn.history,
                                                      history_ids=turn.history_ids, message_id=rec.user_message_id))
        self._on_retrieved(turn, self._retrieve(rec.retrieval_query or rec.original_question))

    async def _agather(self, turn: _Turn) -> None:
        rec = turn.record
        self._on_rewrite(turn, await self._rewriter.arewrite(
            rec.original_question, turn.history, history_ids=turn.history_ids, message_id=rec.user_message_id))
        self._on_retrieved(turn, await self._aretrieve(rec.retrieval_query or rec.original_question))

    @property
    def _stream_synthesizer(self) -> BaseSynthesizer:
        return self._streaming_synthesizer if self._streaming_synthesizer is not None else self._synthesizer

    def _retrieve(self, query: str) -> Dict[str, List[NodeWithScore]]:
        bundle = QueryBundle(query)
        stages = {"retrieve": self._retriever.retrieve(bundle)}
        nodes = stages["retrieve"]
        for name, pp in T.stage_names(self._postprocessors):
            nodes = pp.postprocess_nodes(nodes, query_bundle=bundle) if nodes else nodes
            stages[name] = nodes
        return stages

    async def _aretrieve(self, query: str) -> Dict[str, List[NodeWithScore]]:
        bundle = QueryBundle(query)
        stages = {"retrieve": await self._retriever.aretrieve(bundle)}
        nodes = stages["retrieve"]
        for name, pp in T.stage_names(self._postprocessors):
            nodes = await pp.apostprocess_nodes(nodes, query_bundle=bundle) if nodes else nodes
            stages[name] = nodes
        return stages

    # --- shared steps ----------------------------------------------------------------------------------------------
    def _begin(self, message: str, chat_history: Optional[List[ChatMessage]], streaming: bool) -> _Turn:
        cid = self.conversation_id
        if chat_history is not None:  # an explicit [] means "no history", never "use the stored one"
            history, ids = list(chat_history), None
        else:
            stored = self._store.history(cid)
            if self.rephrase_question:  # only the rewrite window is used: skip converting older messages
                users = [i for i, m in enumerate(stored) if m.role == "user"]
                n = self._rewriter.last_n_turns
                stored = [] if n == 0 or not users else stored[users[-n] if len(users) >= n else users[0]:]
            history, ids = [m.to_chat_message() for m in stored], [m.id for m in stored]
        user, placeholder = self._store.begin_turn(cid, message)
        record = TurnRecord(conversation_id=cid, user_message_id=user.id, assistant_message_id=placeholder.id,
                            original_question=message, streaming=streaming, started_at=time.time())
        dispatcher.event(ChatTurnStartEvent(conversation_id=cid, user_message_id=user.id,
                                            assistant_message_id=placeholder.id, question=message))
        return _Turn(record=record, history=history, history_ids=ids)

    def _on_rewrite(self, turn: _Turn, result: RewriteResult) -> None:
        turn.rewrite = result
        T.apply_rewrite(turn.record, result)
        if result.fallback_reason is not None:
            logger.warning("question rewrite fell back to the original question: %s", result.fallback_reason)
        dispatcher.event(QuestionRewriteEvent(
            question=turn.record.original_question, retrieval_query=result.query, strategy=result.strategy,
            used_llm=result.used_llm, latency_ms=result.latency_ms, fallback_reason=result.fallback_reason,
            skipped_reason=result.skipped_reason))

    def _on_retrieved(self, turn: _Turn, stages: Dict[str, List[NodeWithScore]]) -> None:
        turn.record.retrieved_ids = {k: [n.node.node_id for n in v] for k, v in stages.items()}
        turn.nodes = list(stages[list(stages)[-1]])

    def _no_docs_reply(self) -> str:
        """The fixed reply when nothing was retrieved (only asked for when ``response_if_no_docs_found`` is set)."""
        return self.response_if_no_docs_found if self.response_if_no_docs_found is not None else ""

    def _finish_no_docs(self, turn: _Turn) -> str:
        text = self._no_docs_reply()
        self._finalize(turn, "complete", text, None, None)
        return text

    def _synthesis_query(self, turn: _Turn) -> Optional[str]:
        """None when nothing was retrieved and a fixed reply is configured; else fit the budget and build the query."""
        if self.response_if_no_docs_found is not None and not turn.nodes:
            turn.record.status = "no_docs"
            return None
        return self._fit(turn)

    def _fit(self, turn: _Turn) -> str:
        """Run the budgeter; keep the surviving nodes and return the synthesizer's query."""
        question = turn.record.original_question
        turns = [] if self.rephrase_question else T.group_turns(turn.history)
        chunks = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in turn.nodes]
        report = T.fit(
            question=turn.record.retrieval_query if self.rephrase_question else question,
            history=[self._get_chat_history(t) for t in turns], chunks=chunks,
            system=T.system_text(self._synthesizer, self._llm), count_tokens=self._count_tokens,
            context_window=self._llm.metadata.context_window, reserved_output=self.reserved_output_tokens,
            budget_ratio=self.budget_ratio, max_context_tokens=self.max_tokens_limit,
        )
        turn.trim = report
        turn.record.trim_report = report.to_dict()
        logger.debug("context budget for turn %s: %s", turn.record.assistant_message_id, turn.record.trim_report)
        dispatcher.event(ContextTrimEvent(report=turn.record.trim_report))
        turn.nodes = [turn.nodes[i] for i in report.kept_chunks]
        turn.record.retrieved_ids["budget"] = [n.node.node_id for n in turn.nodes]
        turn.record.retrieved_ids["final"] = [final_doc_id(n) for n in turn.nodes]
        if self.rephrase_question:
            rewritten = turn.record.retrieval_query
            query = rewritten if rewritten is not None else question
        else:
            kept = [m for i in report.kept_history for m in turns[i]]
            query = (self._answer_prompt.format(chat_history=self._get_chat_history(kept), question=question)
                     if kept else question)
        turn.record.synthesis_query = query
        return query

    def _finalize(self, turn: _Turn, status: str, text: str, error: Optional[BaseException], response: Any) -> None:
        """Persist the answer, its citations and the turn record; finalise the placeholder."""
        record = turn.record
        record.answer = text
        if record.status != "no_docs" or status != "complete":
            record.status = status
        record.error = None if error is None else f"{type(error).__name__}: {error}"
        record.finished_at = time.time()
        citations = T.build_citations(response, turn.nodes) if response is not None else []
        record.citations[:] = [c.to_dict() for c in citations]  # in place: streamed metadata holds this list
        self._store.finish_turn(record.conversation_id, record.assistant_message_id, content=text, status=status,
                                error=record.error, citations=citations, record=record.to_dict())
        dispatcher.event(ChatTurnEndEvent(assistant_message_id=record.assistant_message_id, status=record.status,
                                          error=record.error))

    def _metadata(self, turn: _Turn) -> Dict[str, Any]:
        meta: Dict[str, Any] = {
            "conversation_id": turn.record.conversation_id, "message_id": turn.record.assistant_message_id,
            "user_message_id": turn.record.user_message_id, "turn": turn.record, "trim_report": turn.trim,
            "citations": turn.record.citations,
        }
        if self.return_generated_question:
            meta["generated_question"] = turn.record.retrieval_query
        return meta

    def _sources(self, turn: _Turn, text: str, response: Any) -> List[ToolOutput]:
        if not self.return_source_nodes or response is None:
            return []
        return [ToolOutput(content=text, tool_name="convrag_chat",
                           raw_input={"query": turn.record.synthesis_query}, raw_output=response)]

    def _chat_response(self, turn: _Turn, text: str, response: Any) -> AgentChatResponse:
        return AgentChatResponse(response=text, sources=self._sources(turn, text, response),
                                 source_nodes=list(turn.nodes) if self.return_source_nodes else [],
                                 metadata=self._metadata(turn))

    def _stream_response(self, turn: _Turn, finalizer: Finalizer, **streams: Any) -> ConvRAGStreamingResponse:
        return ConvRAGStreamingResponse(
            source_nodes=list(turn.nodes) if self.return_source_nodes else [],
            message_id=turn.record.assistant_message_id, user_message_id=turn.record.user_message_id,
            conversation_id=turn.record.conversation_id, metadata=self._metadata(turn), finalizer=finalizer,
            **streams,
        )


ENGINE_OPTIONS = frozenset({
    "rephrase_question", "return_generated_question", "return_source_nodes", "response_if_no_docs_found",
    "max_tokens_limit", "answer_query_prompt", "budget_ratio", "reserved_output_tokens",
})
