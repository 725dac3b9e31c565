"""``ConvRAGChatEngine``: conversational RAG with a persistent conversation store.

One turn (read ``chat`` top to bottom): store the user message and an assistant placeholder -> rewrite the follow-up
into a retrieval query (retrieval only) -> retrieve and postprocess -> fit the token budget -> answer -> persist the
answer, its citations (bound to the assistant message id) and a replayable ``TurnRecord``. ``achat``, ``stream_chat``
and ``astream_chat`` tell the same story; the turn's state and steps live in :class:`~.turn.Turn`.

Chat modes: ``condense_question`` (the synthesizer answers the retrieval query), ``condense_plus_context`` (the LLM
sees the context, the conversation and the user's words; ``context_chat.py``), ``context`` (the same, no rewrite).
``query_engine=``: it answers the retrieval query. No LLM (none given, none assigned to ``Settings.llm``): no-LLM
rewrite, extractive answers.

``response.metadata`` (streamed responses too): see :meth:`~.turn.Turn.metadata`.
"""

from __future__ import annotations

import copy
import inspect
import uuid
from contextlib import contextmanager
from typing import Any, Dict, FrozenSet, Iterator, List, Optional, Sequence, Tuple

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine.types import AgentChatResponse, BaseChatEngine
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import BaseMemory
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.response_synthesizers import BaseSynthesizer
from llama_index.core.schema import MetadataMode, QueryBundle

from llama_index_convrag.config.llm import configured_llm, token_counter
from llama_index_convrag.config.output_watch import watching
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.postprocessors.widen import narrow_contents, narrowed_nodes
from llama_index_convrag.chat.budget import DEFAULT_BUDGET_RATIO, CachedTokenCounter, TokenCounter, message_fit_in
from llama_index_convrag.chat.context_chat import ContextChat, PromptLike
from llama_index_convrag.chat.defaults import (ENGINE_CITATION_MODE, alias, check_chat_mode, check_parts,
                                               default_synthesizers, fusing_retriever, pick_one, rewrite_strategy_for,
                                               seed_messages)
from llama_index_convrag.conversational.rewrite import HistoryFormatter, QuestionRewriter
from llama_index_convrag.chat.streaming import ConvRAGStreamingResponse, Finalizer, astream_lifecycle, stream_lifecycle
from llama_index_convrag.conversational.triggers import needs_rewrite
from llama_index_convrag.chat.turn import (Stages, Turn, aiter_one, aread_text, async_deltas, group_turns, read_text,
                                           stage_names, sync_deltas, system_text)
from llama_index_convrag.instrumentation import span_when_observed
from llama_index_convrag.chat.hooks import AnswerHook, hooks_scope
from llama_index_convrag.chat.fallback import AnswerFallback, aheld_stream, held_stream, writes_with_llm
from llama_index_convrag.judge.options import JudgeArg, JudgeHook, judge_options, refuse_old_keywords
from llama_index_convrag.judge.query_engine import build_judge_synthesizer
from llama_index_convrag.prompts.chat import DEFAULT_ANSWER_QUERY_PROMPT
from llama_index_convrag.storage.conversation.base import ConversationStore
from llama_index_convrag.storage.conversation.sqlite import SQLiteConversationStore
from llama_index_convrag.synthesizers import get_response_synthesizer

dispatcher = get_dispatcher(__name__)


def message_text(message: Any) -> str:
    """The user's words: a ``str``, or a ``QueryBundle``'s ``query_str`` (core's engines accept both)."""
    if isinstance(message, QueryBundle):
        return message.query_str
    if not isinstance(message, str):
        raise ArgumentTypeError(f"message must be a str or a QueryBundle, got {type(message).__name__}: {message!r}")
    return message



class ConvRAGChatEngine(BaseChatEngine, PromptMixin):
    """Conversational RAG chat engine. ``__init__`` takes built parts; :meth:`from_defaults` builds them."""

    def __init__(
        self,
        *,
        rewriter: QuestionRewriter,
        store: ConversationStore,
        conversation_id: str,
        llm: Optional[LLM] = None,
        retriever: Optional[BaseRetriever] = None,
        synthesizer: Optional[BaseSynthesizer] = None,
        streaming_synthesizer: Optional[BaseSynthesizer] = None,
        query_engine: Optional[BaseQueryEngine] = None,
        context_chat: Optional[ContextChat] = None,
        node_postprocessors: Sequence[BaseNodePostprocessor] = (),
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
        answer_hooks: Sequence[AnswerHook] = (),
        answer_fallback: Optional[AnswerFallback] = None,
    ) -> None:
        check_parts(retriever, synthesizer, query_engine, context_chat)
        bad = [h for h in answer_hooks if not isinstance(h, AnswerHook)]
        if bad:
            raise ArgumentTypeError(f"answer_hooks must provide scope() and record_fields() (AnswerHook), got {bad!r}")
        if max_tokens_limit is not None and max_tokens_limit < 0:
            raise ConfigurationError(f"max_tokens_limit must be >= 0, got {max_tokens_limit!r}")
        if reserved_output_tokens is not None and reserved_output_tokens < 0:
            raise ConfigurationError(f"reserved_output_tokens must be >= 0, got {reserved_output_tokens!r}")
        if not 0 < budget_ratio <= 1:
            raise ConfigurationError(f"budget_ratio must be in (0, 1], got {budget_ratio!r}")
        self._retriever, self._query_engine, self._context_chat = retriever, query_engine, context_chat
        self._synthesizer, self._streaming_synthesizer = synthesizer, streaming_synthesizer
        self._llm, self._rewriter, self._store = llm, rewriter, store
        self.conversation_id = conversation_id
        self._postprocessors = list(node_postprocessors)
        self._answer_hooks = tuple(answer_hooks)
        if answer_fallback is not None and not isinstance(answer_fallback, AnswerFallback):
            raise ArgumentTypeError(f"answer_fallback must be an AnswerFallback, got {answer_fallback!r}")
        # an empty or marker-only LLM answer is never shown (chat/fallback.py)
        self._fallback = answer_fallback if answer_fallback is not None else AnswerFallback()
        self.rephrase_question = rephrase_question and context_chat is None
        self.return_generated_question = return_generated_question
        self.return_source_nodes = return_source_nodes
        self.response_if_no_docs_found = response_if_no_docs_found
        self.max_tokens_limit = max_tokens_limit
        self._get_chat_history = get_chat_history if get_chat_history is not None else rewriter.get_chat_history
        self._answer_prompt = answer_query_prompt if answer_query_prompt is not None else DEFAULT_ANSWER_QUERY_PROMPT
        self.budget_ratio = budget_ratio
        num_output = llm.metadata.num_output if llm is not None else 0
        self.reserved_output_tokens = (
            reserved_output_tokens if reserved_output_tokens is not None else (num_output if num_output > 0 else 256)
        )
        # cached: each history turn is counted once, not on every later turn
        self._count_tokens = CachedTokenCounter(count_tokens if count_tokens is not None else rewriter.count_tokens)

    @classmethod
    def from_defaults(
        cls,
        retriever: Optional[BaseRetriever] = None,
        llm: Optional[LLM] = None,
        *,
        query_engine: Optional[BaseQueryEngine] = None,
        chat_mode: str = "condense_question",
        condense_llm: Optional[LLM] = None,
        synthesizer: Optional[BaseSynthesizer] = None,
        streaming_synthesizer: Optional[BaseSynthesizer] = None,
        embed_model: Optional[BaseEmbedding] = None,
        node_postprocessors: Optional[Sequence[BaseNodePostprocessor]] = None,
        conversation_store: Optional[ConversationStore] = None,
        conversation_id: Optional[str] = None,
        chat_history: Optional[List[ChatMessage]] = None,
        memory: Optional[BaseMemory] = None,
        system_prompt: Optional[str] = None,
        context_prompt: Optional[PromptLike] = None,
        context_refine_prompt: Optional[PromptLike] = None,
        rewrite_strategy: Optional[str] = None,
        contextual_fusion: bool = True,
        skip_condense: bool = False,
        rewrite_trigger: bool = True,
        last_n_turns: int = 3,
        max_rewrite_history_tokens: int = 1024,
        condense_prompt: Optional[BasePromptTemplate] = None,
        condense_question_prompt: Optional[BasePromptTemplate] = None,
        get_chat_history: Optional[HistoryFormatter] = None,
        count_tokens: Optional[TokenCounter] = None,
        return_source_documents: Optional[bool] = None,
        judge: JudgeArg = None,
        **kwargs: Any,
    ) -> "ConvRAGChatEngine":
        """Build the rewriter, our synthesizers and an in-memory SQLite store where not given.

        ``kwargs`` are :data:`ENGINE_OPTIONS` (``__init__``'s options: ``rephrase_question``, ...) and
        ``get_response_synthesizer``'s arguments (``response_mode``, ``citations``, ``citation_mode``: default
        :data:`~.defaults.ENGINE_CITATION_MODE`, templates, ...). Core's names are
        accepted: ``query_engine`` (condense-question over any query engine), ``condense_question_prompt``,
        ``memory`` (its messages seed the conversation, as ``chat_history`` does), ``skip_condense`` (rewrite
        strategy ``none``), LangChain's ``return_source_documents`` (``return_source_nodes``). ``llm``: the one given,
        else the one assigned to ``Settings.llm`` (never core's default-building getter; the synthesizer factory's rule,
        ``synthesizers/resolve.py``); with neither, answers are :data:`~.defaults.NO_LLM_RESPONSE_MODE`.
        ``rewrite_strategy``: one of :data:`~.defaults.REWRITE_STRATEGIES`; ``None`` or ``"auto"`` is ``llm`` when a
        (condense) LLM is resolved and ``contextual`` (:data:`~.defaults.NO_LLM_REWRITE_STRATEGY`) otherwise. With
        ``contextual`` and a retriever, a follow-up is searched as typed and as expanded and the two lists fused
        (:class:`~llama_index_convrag.conversational.retriever.ConversationalRetriever`;
        ``contextual_fusion=False`` searches the expanded query alone).
        ``judge``: ``True``, a ``BaseJudge`` or a :class:`~llama_index_convrag.judge.options.JudgeOptions` (the judge,
        its LLM and prompt, the search limits): judge-guided answers (:mod:`llama_index_convrag.judge`,
        condense_question mode with a retriever), hooked in as an :class:`~.hooks.AnswerHook`; the search tree is
        stored in the turn record (``judge_tree``) and returned in the metadata.
        """
        llm = configured_llm(llm)  # given, else assigned to Settings.llm (one rule with the synthesizer factory)
        count_tokens = count_tokens if count_tokens is not None else token_counter(llm)  # the served model's count
        refuse_old_keywords(kwargs)
        judging = judge_options(judge)
        options, synth_kw = split_engine_kwargs(kwargs)
        if synthesizer is None and query_engine is None:  # the synthesizers built here cite aligned unless told
            synth_kw.setdefault("citation_mode", ENGINE_CITATION_MODE)
        mode = check_chat_mode(chat_mode, system_prompt, context_prompt, context_refine_prompt, llm)
        options.update(alias("return_source_documents", return_source_documents, "return_source_nodes", options))
        condense = pick_one("condense_prompt", condense_prompt, "condense_question_prompt", condense_question_prompt)
        seed = seed_messages(chat_history, memory)
        rewriter = QuestionRewriter(
            strategy=rewrite_strategy_for(rewrite_strategy, skip_condense or mode == "context",
                                          llm if condense_llm is None else condense_llm),
            llm=condense_llm if condense_llm is not None else llm, condense_prompt=condense,
            last_n_turns=last_n_turns, max_history_tokens=max_rewrite_history_tokens,
            trigger=needs_rewrite if rewrite_trigger else None, get_chat_history=get_chat_history,
            count_tokens=count_tokens,
        )
        retriever = fusing_retriever(retriever, rewriter, contextual_fusion)
        context_chat = None
        if mode != "condense_question" and llm is not None:
            context_chat = ContextChat(llm, system_prompt=system_prompt, context_prompt=context_prompt,
                                       context_refine_prompt=context_refine_prompt, synth_kwargs=synth_kw)
        hooks: List[AnswerHook] = []
        if judging is not None:
            if context_chat is not None or synthesizer is not None or query_engine is not None or retriever is None:
                raise ArgumentTypeError("judge= needs chat_mode='condense_question' with a retriever and no synthesizer= or "
                                "query_engine= (the judge builds its own synthesizers)")
            synthesizer = build_judge_synthesizer(retriever, llm=llm, options=judging, **synth_kw)
            streaming_synthesizer = build_judge_synthesizer(retriever, llm=llm, options=judging,
                                                            **{**synth_kw, "streaming": True})
            hooks.append(JudgeHook())
        elif context_chat is not None:
            pass  # the context modes build their synthesizer per turn
        elif synthesizer is None and query_engine is None:
            synthesizer, streaming_synthesizer = default_synthesizers(llm, embed_model, synth_kw, streaming_synthesizer)
        elif synth_kw or embed_model is not None:
            given = sorted([*synth_kw, *(["embed_model"] if embed_model is not None else [])])
            raise ArgumentTypeError(f"{given} configure the synthesizer this engine builds; not with synthesizer= or "
                            "query_engine=")
        store = conversation_store if conversation_store is not None else SQLiteConversationStore(":memory:")
        cid = conversation_id if conversation_id is not None else uuid.uuid4().hex
        for message in seed:
            store.add_message(cid, message)
        return cls(
            retriever=retriever, query_engine=query_engine, synthesizer=synthesizer, context_chat=context_chat,
            streaming_synthesizer=streaming_synthesizer, llm=llm, rewriter=rewriter, store=store, conversation_id=cid,
            node_postprocessors=node_postprocessors if node_postprocessors is not None else (),
            get_chat_history=get_chat_history, count_tokens=count_tokens, answer_hooks=hooks, **options,
        )

    def for_conversation(self, conversation_id: str, store: Optional[ConversationStore] = None) -> "ConvRAGChatEngine":
        """An engine for another conversation that shares every built part of this one (retriever, rewriter,
        synthesizers, LLM, postprocessors, options; the store unless ``store`` is given). A turn's state travels with
        the turn (:class:`~.turn.Turn`, the query's plan), so one set of parts serves many conversations at once: a
        service makes one of these per request."""
        if not isinstance(conversation_id, str) or not conversation_id:
            raise ConfigurationError(f"conversation_id must be a non-empty string, got {conversation_id!r}")
        twin = copy.copy(self)
        twin.conversation_id = conversation_id
        if store is not None:
            twin._store = store
        return twin

    # --- PromptMixin ---------------------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {"answer_query_prompt": self._answer_prompt}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "answer_query_prompt" in prompts_dict:
            self._answer_prompt = prompts_dict["answer_query_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        parts = {"rewriter": self._rewriter, "synthesizer": self._synthesizer, "query_engine": self._query_engine,
                 "context_chat": self._context_chat}
        return {k: v for k, v in parts.items() if isinstance(v, PromptMixin)}

    # --- state ---------------------------------------------------------------------------------------------------
    @property
    def store(self) -> ConversationStore:
        return self._store

    @property
    def chat_history(self) -> List[ChatMessage]:
        """The messages the next turn conditions on: user messages as written, complete answers, and the partial
        text of answers whose stream the reader stopped (``cancelled``, non-empty)."""
        return [m.to_chat_message() for m in self._store.history(self.conversation_id)]

    def reset(self) -> None:
        """Start a new conversation. The previous one stays in the store (nothing is deleted)."""
        self.conversation_id = uuid.uuid4().hex

    # --- one turn, four ways -------------------------------------------------------------------------------------
    @span_when_observed(dispatcher)
    def chat(self, message: str, chat_history: Optional[List[ChatMessage]] = None) -> AgentChatResponse:
        turn = self._begin(message, chat_history, streaming=False)
        with self._failing(turn):
            self._apply_rewrite(turn)
            self._apply_retrieval(turn)
            query = self._fit(turn)
            response = None if query is None else self._answer(turn, query, streaming=False)
            text = self._no_docs_reply() if response is None else self._recovered(turn, query, read_text(response))
        turn.finish(self._store, "complete", text, None, response)
        return self._chat_response(turn, text, response)

    @span_when_observed(dispatcher)
    async def achat(self, message: str, chat_history: Optional[List[ChatMessage]] = None) -> AgentChatResponse:
        turn = self._begin(message, chat_history, streaming=False)
        with self._failing(turn):
            await self._aapply_rewrite(turn)
            await self._aapply_retrieval(turn)
            query = self._fit(turn)
            response = None if query is None else await self._aanswer(turn, query, streaming=False)
            text = self._no_docs_reply() if response is None else await self._arecovered(
                turn, query, await aread_text(response))
        turn.finish(self._store, "complete", text, None, response)
        return self._chat_response(turn, text, response)

    @span_when_observed(dispatcher)
    def stream_chat(self, message: str, chat_history: Optional[List[ChatMessage]] = None) -> ConvRAGStreamingResponse:
        turn = self._begin(message, chat_history, streaming=True)
        with self._failing(turn):
            self._apply_rewrite(turn)
            self._apply_retrieval(turn)
            query = self._fit(turn)
            response = None if query is None else self._answer(turn, query, streaming=True)
        deltas = iter([self._no_docs_reply()]) if response is None else held_stream(
            sync_deltas(response), lambda held: self._recovered(turn, query, held),
            self._fallback.judged_question(query))
        finalizer = self._finalizer(turn, response)
        return self._stream_response(turn, finalizer, sync_stream=stream_lifecycle(deltas, finalizer))

    @span_when_observed(dispatcher)
    async def astream_chat(
        self, message: str, chat_history: Optional[List[ChatMessage]] = None
    ) -> ConvRAGStreamingResponse:
        turn = self._begin(message, chat_history, streaming=True)
        with self._failing(turn):
            await self._aapply_rewrite(turn)
            await self._aapply_retrieval(turn)
            query = self._fit(turn)
            response = None if query is None else await self._aanswer(turn, query, streaming=True)
        deltas = aiter_one(self._no_docs_reply()) if response is None else aheld_stream(
            async_deltas(response), lambda held: self._arecovered(turn, query, held),
            self._fallback.judged_question(query))
        finalizer = self._finalizer(turn, response)
        return self._stream_response(turn, finalizer, async_stream=astream_lifecycle(deltas, finalizer))

    # --- the steps -----------------------------------------------------------------------------------------------
    def _begin(self, message: str, chat_history: Optional[List[ChatMessage]], streaming: bool) -> Turn:
        window = self._rewriter.history_window if self.rephrase_question else None
        return Turn.begin(self._store, self.conversation_id, message_text(message), chat_history=chat_history, window=window,
                          streaming=streaming)

    @contextmanager
    def _failing(self, turn: Turn) -> Iterator[None]:
        """A step that raises finalises the placeholder as ``error`` (the user message stays) and re-raises."""
        try:
            yield
        except Exception as e:
            turn.finish(self._store, "error", "", e, None)
            raise

    def _apply_rewrite(self, turn: Turn) -> None:
        turn.apply_rewrite(self._rewriter.rewrite(turn.question, turn.history, history_ids=turn.history_ids,
                                                  message_id=turn.record.user_message_id))

    async def _aapply_rewrite(self, turn: Turn) -> None:
        turn.apply_rewrite(await self._rewriter.arewrite(turn.question, turn.history, history_ids=turn.history_ids,
                                                         message_id=turn.record.user_message_id))

    def _apply_retrieval(self, turn: Turn) -> None:
        if self._retriever is None:  # a query engine retrieves while it answers
            return
        bundle = turn.retrieval_bundle()
        stages: Stages = {"retrieve": self._retriever.retrieve(bundle)}
        for name, pp in stage_names(self._postprocessors):
            nodes = stages[list(stages)[-1]]
            stages[name] = pp.postprocess_nodes(nodes, query_bundle=bundle) if nodes else nodes
        turn.apply_stages(stages)
        turn.apply_fusion(bundle.fusion)

    async def _aapply_retrieval(self, turn: Turn) -> None:
        if self._retriever is None:
            return
        bundle = turn.retrieval_bundle()
        stages: Stages = {"retrieve": await self._retriever.aretrieve(bundle)}
        for name, pp in stage_names(self._postprocessors):
            nodes = stages[list(stages)[-1]]
            stages[name] = await pp.apostprocess_nodes(nodes, query_bundle=bundle) if nodes else nodes
        turn.apply_stages(stages)
        turn.apply_fusion(bundle.fusion)

    def _fit(self, turn: Turn) -> Optional[str]:
        """The query to answer, after the token budget kept what fits; None when nothing was retrieved and a fixed
        reply is configured. Without an LLM (or with a query engine) nothing is trimmed."""
        if self.response_if_no_docs_found is not None and self._retriever is not None and not turn.nodes:
            turn.record.status = "no_docs"
            return None
        if self._llm is None or self._query_engine is not None:
            if self._retriever is not None:
                turn.apply_trim(None)
            turn.record.synthesis_query = turn.retrieval_query
            return turn.record.synthesis_query
        question = turn.retrieval_query if self.rephrase_question else turn.question
        turns = [] if self.rephrase_question else group_turns(turn.history)
        report = message_fit_in(
            question=question, history=[self._get_chat_history(t) for t in turns],
            chunks=[n.node.get_content(metadata_mode=MetadataMode.LLM) for n in turn.nodes],
            system=self._context_chat.system_text() if self._context_chat is not None
            else system_text(self._synthesizer, self._llm),
            count_tokens=self._count_tokens, context_window=self._llm.metadata.context_window,
            reserved_output=self.reserved_output_tokens, budget_ratio=self.budget_ratio,
            max_context_tokens=self.max_tokens_limit, narrow_chunks=narrow_contents(turn.nodes),
        )
        turn.nodes = narrowed_nodes(turn.nodes, report.narrowed)  # widened passages the budget cut back
        turn.apply_trim(report)
        turn.answer_history = [m for i in report.kept_history for m in turns[i]]
        if turn.answer_history and self._context_chat is None and not self.rephrase_question:
            question = self._answer_prompt.format(chat_history=self._get_chat_history(turn.answer_history),
                                                  question=question)
        turn.record.synthesis_query = question
        return question

    def _synthesizer_for(self, turn: Turn, streaming: bool) -> BaseSynthesizer:
        if self._context_chat is not None:
            return self._context_chat.synthesizer(turn.answer_history, streaming=streaming)
        if streaming and self._streaming_synthesizer is not None:
            return self._streaming_synthesizer
        return self._synthesizer  # type: ignore[return-value]

    def _answer(self, turn: Turn, query: str, streaming: bool) -> Any:
        turn.begin_answer(writes_with_llm(self._synthesizer, self._llm))
        if self._query_engine is not None:
            response = self._query_engine.query(query)
            turn.apply_sources(getattr(response, "source_nodes", None) or [])
            return response
        with hooks_scope(self._answer_hooks, turn.record.assistant_message_id), watching(turn.output):
            response = self._synthesizer_for(turn, streaming).synthesize(query, turn.nodes)
        turn.apply_hooks(self._answer_hooks, response)
        return response

    async def _aanswer(self, turn: Turn, query: str, streaming: bool) -> Any:
        turn.begin_answer(writes_with_llm(self._synthesizer, self._llm))
        if self._query_engine is not None:
            response = await self._query_engine.aquery(query)
            turn.apply_sources(getattr(response, "source_nodes", None) or [])
            return response
        with hooks_scope(self._answer_hooks, turn.record.assistant_message_id), watching(turn.output):
            response = await self._synthesizer_for(turn, streaming).asynthesize(query, turn.nodes)
        turn.apply_hooks(self._answer_hooks, response)
        return response

    def _recovered(self, turn: Turn, query: str, text: str) -> str:
        """``text``, or the answer shown instead when it is empty, only citation markers or ``query`` restated
        (chat/fallback.py)."""
        reason = turn.recovery_reason(text, self._fallback.judged_question(query))
        if reason is None:
            return text
        with watching(turn.output):  # the retry's call is watched too (an answer it cut at max_tokens is flagged)
            recovered = self._fallback.recover(self._synthesizer_for(turn, False), query, turn.nodes, reason)
        return turn.apply_recovered(recovered, reason, text)

    async def _arecovered(self, turn: Turn, query: str, text: str) -> str:
        """Async twin of :meth:`_recovered`."""
        reason = turn.recovery_reason(text, self._fallback.judged_question(query))
        if reason is None:
            return text
        with watching(turn.output):
            recovered = await self._fallback.arecover(self._synthesizer_for(turn, False), query, turn.nodes, reason)
        return turn.apply_recovered(recovered, reason, text)

    def _no_docs_reply(self) -> str:
        """The fixed reply when nothing was retrieved (only asked for when ``response_if_no_docs_found`` is set)."""
        return self.response_if_no_docs_found if self.response_if_no_docs_found is not None else ""

    def _finalizer(self, turn: Turn, response: Any) -> Finalizer:
        return Finalizer(lambda status, text, error: turn.finish(self._store, status, text, error, response))

    def _chat_response(self, turn: Turn, text: str, response: Any) -> AgentChatResponse:
        return turn.chat_response(text, response, sources=self.return_source_nodes,
                                  generated_question=self.return_generated_question)

    def _stream_response(self, turn: Turn, finalizer: Finalizer, **streams: Any) -> ConvRAGStreamingResponse:
        return turn.stream_response(finalizer, sources=self.return_source_nodes,
                                    generated_question=self.return_generated_question, **streams)


# --- construction helpers (pure) ---------------------------------------------------------------------------------
BUILT_PARTS = frozenset({"self", "rewriter", "store", "conversation_id", "llm", "retriever", "synthesizer",
                         "streaming_synthesizer", "query_engine", "context_chat", "node_postprocessors",
                         "get_chat_history", "count_tokens"})
ENGINE_OPTIONS: FrozenSet[str] = frozenset(inspect.signature(ConvRAGChatEngine.__init__).parameters) - BUILT_PARTS
"""``__init__``'s options that ``from_defaults`` passes through (derived from the signature)."""
SYNTH_KWARGS: FrozenSet[str] = frozenset(inspect.signature(get_response_synthesizer).parameters) - {
    "llm", "streaming", "callback_manager"}
"""``get_response_synthesizer``'s arguments that ``from_defaults`` forwards (derived from the signature)."""


def split_engine_kwargs(kwargs: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``(engine options, synthesizer kwargs)``; TypeError naming unknown names and the accepted ones."""
    unknown = sorted(set(kwargs) - ENGINE_OPTIONS - SYNTH_KWARGS)
    if unknown:
        accepted = sorted(ENGINE_OPTIONS | SYNTH_KWARGS | from_defaults_names())
        raise ArgumentTypeError(f"unknown ConvRAGChatEngine options {unknown}; accepted: {accepted}")
    return ({k: v for k, v in kwargs.items() if k in ENGINE_OPTIONS},
            {k: v for k, v in kwargs.items() if k in SYNTH_KWARGS})


def from_defaults_names() -> FrozenSet[str]:
    """Every keyword ``from_defaults`` takes by name (its signature, without ``cls`` and ``**kwargs``)."""
    params = inspect.signature(ConvRAGChatEngine.from_defaults).parameters.values()
    return frozenset(p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD)


