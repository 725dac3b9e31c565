"""``ConvRAGChatEngine``: conversational RAG with a persistent conversation store.

One turn (read ``chat`` top to bottom): store the user message and an assistant placeholder -> rewrite the follow-up
into a retrieval query (retrieval only) -> retrieve and postprocess (with memory: recall beside it) -> fit the token
budget -> answer -> persist the answer, its citations (bound to the assistant message id) and a replayable
``TurnRecord``. ``achat``, ``stream_chat`` and ``astream_chat`` tell the same story; the turn's state and steps live
in :class:`~.turn.Turn`.

Chat modes: ``condense_question`` (the synthesizer answers the retrieval query), ``condense_plus_context`` (the LLM
sees the context, the conversation and the user's words; ``context_chat.py``), ``context`` (the same, no rewrite).
``query_engine=``: it answers the retrieval query. No LLM (none given, none assigned to ``Settings.llm``): no-LLM
rewrite, extractive answers.

Storage: every turn makes two calls through the engine's port (:mod:`~.port`): ``load`` before retrieval (the
user message and the placeholder stored, the history and the turn's memory read) and ``commit`` after the answer
(then the memory writes are queued in the background: :meth:`ConvRAGChatEngine.close` waits for them).

Memory (``memory=MemoryOptions(...)``: :mod:`~.memory_step`): while it retrieves, the turn recalls earlier messages
with its retrieval query (one query embedding serves both); the summary, the user's facts, the recalled messages and
the recent history are then fitted with the evidence under one budget (:func:`~.blocks.fit_blocks`) and the kept
memory goes where the chat mode puts context. ``chat_turn`` /
``achat_turn`` / ``stream_turn`` / ``astream_turn`` answer a turn whose context was loaded already (a service loads it
with its own claim first). A streamed answer passes one pipeline (:mod:`~.stream_pipeline`) and one hold.

``response.metadata`` (streamed responses too): see :meth:`~.turn.Turn.metadata`.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Any, AsyncIterator, Iterator, List, Optional, Sequence, Tuple, Union

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
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

from llama_index_convrag._beside import arun_beside, run_beside
from llama_index_convrag.config.llm import configured_llm, token_counter
from llama_index_convrag.config.output_watch import watching
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError, RecordNotFoundError
from llama_index_convrag.postprocessors.widen import narrow_contents, narrowed_nodes, with_widener
from llama_index_convrag.chat.budget import CachedTokenCounter, message_fit_in
from llama_index_convrag.chat.context_chat import ContextChat
from llama_index_convrag.chat.defaults import (check_chat_mode, check_parts, default_synthesizers, fusing_retriever,
                                               rewrite_strategy_for, streaming_twin, synthesizer_kwargs)
from llama_index_convrag.chat.memory_step import build_memory, fit_with_memory, memory_arg
from llama_index_convrag.chat.options import (FROM_DEFAULTS_NAMES, AnswerOptions, BudgetOptions, RewriteOptions,
                                              options_of, refuse_names)
from llama_index_convrag.chat.port import TurnContext, TurnPort, TurnRequest, turn_port
from llama_index_convrag.chat.stream_pipeline import TurnStream, stream_parts
from llama_index_convrag.conversational.rewrite import QuestionRewriter
from llama_index_convrag.chat.streaming import ConvRAGStreamingResponse
from llama_index_convrag.chat.turn import Stages, Turn, aread_text, group_turns, read_text, stage_names, system_text
from llama_index_convrag.instrumentation import span_when_observed
from llama_index_convrag.chat.hooks import hooks_scope
from llama_index_convrag.chat.fallback import writes_with_llm
from llama_index_convrag.judge.options import JudgeHook, judge_options
from llama_index_convrag.judge.query_engine import build_judge_synthesizer
from llama_index_convrag.memory.conversation import ConversationMemory
from llama_index_convrag.memory.options import MemoryOptions
from llama_index_convrag.prompts.chat import DEFAULT_ANSWER_QUERY_PROMPT
from llama_index_convrag.prompts.memory import MEMORY_QUERY_PROMPT
from llama_index_convrag.storage.conversation._sql import DEFAULT_OWNER
from llama_index_convrag.storage.conversation.base import ConversationStore
from llama_index_convrag.synthesizers.stream_hold import StreamHold

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
        port: TurnPort,
        conversation_id: str,
        llm: Optional[LLM] = None,
        retriever: Optional[BaseRetriever] = None,
        synthesizer: Optional[BaseSynthesizer] = None,
        streaming_synthesizer: Optional[BaseSynthesizer] = None,
        query_engine: Optional[BaseQueryEngine] = None,
        context_chat: Optional[ContextChat] = None,
        node_postprocessors: Sequence[BaseNodePostprocessor] = (),
        answer: Optional[AnswerOptions] = None,
        budget: Optional[BudgetOptions] = None,
        memory: Optional[ConversationMemory] = None,
        owner: str = DEFAULT_OWNER,
    ) -> None:
        check_parts(retriever, synthesizer, query_engine, context_chat)
        if not isinstance(port, TurnPort):
            raise ArgumentTypeError(f"port must be a TurnPort, got {type(port).__name__}: {port!r}")
        if memory is not None:
            port.bind_memory(memory)
        self._memory = memory
        self.owner = check_owner(owner)
        self._retriever, self._query_engine, self._context_chat = retriever, query_engine, context_chat
        self._synthesizer, self._streaming_synthesizer = synthesizer, streaming_synthesizer
        self._llm, self._rewriter, self._port = llm, rewriter, port
        self.conversation_id = conversation_id
        self._postprocessors = list(node_postprocessors)
        self.answer = options_of(AnswerOptions, answer, "answer")
        self.budget = options_of(BudgetOptions, budget, "budget")
        # an empty or marker-only LLM answer is never shown (chat/fallback.py)
        self._fallback = self.answer.fallback_or_default
        self._answer_hooks = self.answer.hooks
        self.rephrase_question = self.answer.rephrase_question and context_chat is None
        self._answer_prompt = (self.answer.answer_query_prompt if self.answer.answer_query_prompt is not None
                               else DEFAULT_ANSWER_QUERY_PROMPT)
        num_output = llm.metadata.num_output if llm is not None else 0
        reserved = self.budget.reserved_output_tokens
        self.reserved_output_tokens = reserved if reserved is not None else (num_output if num_output > 0 else 256)
        # cached: each history turn is counted once, not on every later turn
        counter = self.budget.count_tokens
        self._count_tokens = CachedTokenCounter(counter if counter is not None else rewriter.count_tokens)

    @classmethod
    def from_defaults(
        cls,
        retriever: Optional[BaseRetriever] = None,
        llm: Optional[LLM] = None,
        *,
        query_engine: Optional[BaseQueryEngine] = None,
        synthesizer: Optional[BaseSynthesizer] = None,
        node_postprocessors: Optional[Sequence[BaseNodePostprocessor]] = None,
        chat_mode: str = "condense_question",
        system_prompt: Optional[str] = None,
        condense_question_prompt: Optional[BasePromptTemplate] = None,
        chat_history: Optional[List[ChatMessage]] = None,
        memory: Union[None, MemoryOptions, ConversationMemory, BaseMemory] = None,
        conversation_store: Union[None, ConversationStore, TurnPort] = None,
        conversation_id: Optional[str] = None,
        rewrite: Optional[RewriteOptions] = None,
        answer: Optional[AnswerOptions] = None,
        budget: Optional[BudgetOptions] = None,
        **removed: Any,
    ) -> "ConvRAGChatEngine":
        """Build the rewriter, our synthesizers and the port (an in-memory SQLite store where none is given).

        The names are core's chat engines' (:data:`~.options.FROM_DEFAULTS_NAMES`): ``retriever`` (we retrieve and
        answer) or ``query_engine`` (it answers the retrieval query); ``llm``: the one given, else the one assigned
        to ``Settings.llm`` (never core's default-building getter); with neither, answers are
        :data:`~.defaults.NO_LLM_RESPONSE_MODE`. ``synthesizer``: answers instead of ours (its streaming twin serves
        streamed turns; its own settings are its own: ``get_response_synthesizer(...)``). ``chat_mode``: one of
        :data:`~.defaults.CHAT_MODES`; ``system_prompt`` shapes the context modes' answers;
        ``condense_question_prompt`` the ``llm`` rewrite. ``chat_history`` seeds a new conversation. ``memory``:
        :class:`~llama_index_convrag.memory.options.MemoryOptions` (recall of earlier turns, a running summary, user
        facts: built from the retriever's Milvus and embedding model, the store and the LLM), a built
        ``ConversationMemory``, or a core memory: ``Memory`` (its messages seed the conversation, its blocks join
        each turn's budget) or ``ChatMemoryBuffer`` (its messages seed it); others are refused naming what to use
        (:func:`~.memory_step.memory_arg`). ``conversation_store``: a ``ConversationStore`` (or a built
        :class:`~.port.TurnPort`); ``conversation_id``: the conversation (default: a new one). ``rewrite``,
        ``answer``, ``budget``: :class:`~.options.RewriteOptions`, :class:`~.options.AnswerOptions`,
        :class:`~.options.BudgetOptions`. A name this method took before is refused with its place now.
        """
        refuse_names(removed, "ConvRAGChatEngine.from_defaults", FROM_DEFAULTS_NAMES)
        rewrite = options_of(RewriteOptions, rewrite, "rewrite")
        answer = options_of(AnswerOptions, answer, "answer")
        budget = options_of(BudgetOptions, budget, "budget")
        llm = configured_llm(llm)  # given, else assigned to Settings.llm (one rule with the synthesizer factory)
        count_tokens = budget.count_tokens if budget.count_tokens is not None else token_counter(llm)
        judging = judge_options(answer.judge)
        mode = check_chat_mode(chat_mode, system_prompt, answer.context_prompt, answer.context_refine_prompt, llm,
                               answer.prefix_messages or None)
        memory_given = memory_arg(memory, chat_history)
        port = turn_port(conversation_store)
        conversation_memory = build_memory(memory_given, store=port.store, retriever=retriever, llm=llm,
                                           count_tokens=count_tokens, query_engine=query_engine)
        condense_llm = rewrite.llm if rewrite.llm is not None else llm
        rewriter = QuestionRewriter(
            strategy=rewrite_strategy_for(rewrite.strategy, mode == "context", condense_llm), llm=condense_llm,
            condense_prompt=condense_question_prompt, last_n_turns=rewrite.last_n_turns,
            max_history_tokens=rewrite.max_history_tokens, trigger=rewrite.trigger,
            get_chat_history=rewrite.get_chat_history, count_tokens=count_tokens, context_rules=rewrite.context_rules,
        )
        node_postprocessors = with_widener(node_postprocessors, retriever, answer.widen)  # before the rewrite wraps it
        retriever = fusing_retriever(retriever, rewriter, rewrite.fusion)
        synth_kw = synthesizer_kwargs(answer.response_mode, answer.citations, answer.citation_mode,
                                      answer.embed_model, llm, answer.support_scorer)
        context_chat = None
        if mode != "condense_question" and llm is not None:
            context_chat = ContextChat(llm, mode=mode, system_prompt=system_prompt, context_prompt=answer.context_prompt,
                                       context_refine_prompt=answer.context_refine_prompt,
                                       prefix_messages=answer.prefix_messages, synth_kwargs=synth_kw)
        streaming_synthesizer: Optional[BaseSynthesizer] = None
        if synthesizer is not None or query_engine is not None:
            given = built_synthesizer_options(answer)
            if given or judging is not None:
                raise ArgumentTypeError(f"AnswerOptions {[*given, *(['judge'] if judging else [])]} configure the "
                                        "synthesizer this engine builds; not with synthesizer= or query_engine= (set "
                                        "them on your own: get_response_synthesizer(...))")
        if judging is not None:
            if context_chat is not None or retriever is None:
                raise ArgumentTypeError("AnswerOptions(judge=...) needs chat_mode='condense_question' with a "
                                        "retriever (the judge builds its own synthesizers)")
            synthesizer = build_judge_synthesizer(retriever, llm=llm, options=judging, **synth_kw)
            streaming_synthesizer = build_judge_synthesizer(retriever, llm=llm, options=judging,
                                                            **{**synth_kw, "streaming": True})
            answer = replace(answer, hooks=(*answer.hooks, JudgeHook()))
        elif context_chat is not None:
            pass  # the context modes build their synthesizer per turn
        elif synthesizer is None and query_engine is None:
            synthesizer, streaming_synthesizer = default_synthesizers(llm, synth_kw)
        elif synthesizer is not None:
            streaming_synthesizer = streaming_twin(synthesizer)
        cid = conversation_id if conversation_id is not None else uuid.uuid4().hex
        for message in memory_given.seed:
            port.store.add_message(cid, message)
        engine = cls(
            retriever=retriever, query_engine=query_engine, synthesizer=synthesizer, context_chat=context_chat,
            streaming_synthesizer=streaming_synthesizer, llm=llm, rewriter=rewriter, port=port, conversation_id=cid,
            node_postprocessors=node_postprocessors,
            answer=answer, budget=replace(budget, count_tokens=count_tokens), memory=conversation_memory,
        )
        if conversation_memory is not None and memory_given.seed:
            conversation_memory.schedule_backfill(engine.owner, cid)  # the seeded messages, for recall and summary
        return engine

    def for_conversation(self, conversation_id: str, port: Union[None, ConversationStore, TurnPort] = None, *,
                         owner: Optional[str] = None) -> "ConvRAGChatEngine":
        """An engine for another conversation that shares every built part of this one (retriever, rewriter,
        synthesizers, LLM, postprocessors, options, memory and its writer; the port unless ``port`` is given: a
        ``TurnPort`` or a ``ConversationStore``, given the memory too). ``owner``: whose turns these are (memory rows
        are read and written as theirs; a service passes the caller's user id; default: this engine's). A turn's
        state travels with the turn (:class:`~.turn.Turn`, the query's plan), so one set of parts serves many
        conversations at once: a service makes one of these per request."""
        if not isinstance(conversation_id, str) or not conversation_id:
            raise ConfigurationError(f"conversation_id must be a non-empty string, got {conversation_id!r}")
        twin = copy.copy(self)
        twin.conversation_id = conversation_id
        if owner is not None:
            twin.owner = check_owner(owner)
        if port is not None:
            twin._port = turn_port(port, self._memory)
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
    def port(self) -> TurnPort:
        """The turn port: where every turn is loaded and committed."""
        return self._port

    @property
    def store(self) -> ConversationStore:
        return self._port.store

    @property
    def chat_history(self) -> List[ChatMessage]:
        """The messages the next turn conditions on: user messages as written, complete answers, and the partial
        text of answers whose stream the reader stopped (``cancelled``, non-empty)."""
        return [m.to_chat_message() for m in self.store.history(self.conversation_id)]

    def reset(self) -> None:
        """Start a new conversation. The previous one stays in the store (nothing is deleted)."""
        self.conversation_id = uuid.uuid4().hex

    # --- memory --------------------------------------------------------------------------------------------------
    @property
    def memory(self) -> Optional[ConversationMemory]:
        """The engine's memory (None: off): what a user or an API reads, edits and deletes through
        (``summary``, ``edit_summary``, ``facts``, ``delete_fact``, ``recall_debug``, ...)."""
        return self._memory

    @property
    def reads_memory(self) -> bool:
        """Whether turns load memory into the prompt: memory is on and the engine writes the answer's prompt (an
        LLM, no query engine). Without an LLM the writes still run, for a later engine with one."""
        return self._memory is not None and bool(self._memory.parts) and self._llm is not None \
            and self._query_engine is None

    def flush_memory(self, timeout: Optional[float] = None) -> bool:
        """Wait until the memory writes queued so far have run (True: done within ``timeout`` seconds)."""
        return self._memory.flush(timeout) if self._memory is not None else True

    def close(self, timeout: Optional[float] = None) -> bool:
        """Wait for the queued memory writes and refuse later ones (twins from :meth:`for_conversation` share
        them: close the engine you built, once)."""
        return self._memory.close(timeout) if self._memory is not None else True

    async def aclose(self, timeout: Optional[float] = None) -> bool:
        """Async twin of :meth:`close` (waits in a worker thread)."""
        return await asyncio.to_thread(self.close, timeout)

    def __enter__(self) -> "ConvRAGChatEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "ConvRAGChatEngine":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def delete_conversation(self, conversation_id: Optional[str] = None) -> int:
        """Delete a conversation (default: this one) of this engine's owner with everything stored for it: messages,
        citations, records, summaries, and its recall rows; the number of messages deleted. Facts are the user's
        and stay (``engine.memory.delete_fact`` / ``forget_facts``). RecordNotFoundError for another owner's."""
        cid = conversation_id if conversation_id is not None else self.conversation_id
        info = getattr(self.store, "conversation_info", None)
        if info is not None and info(cid, owner=self.owner) is None and (
                info(cid) is not None or cid in self.store.list_conversations()):
            raise RecordNotFoundError(f"no conversation {cid!r} of this owner")
        if self._memory is not None:
            self._memory.delete_conversation(self.owner, cid)
        return len(self.store.delete_conversation(cid))

    def turn_request(self, message: Any, chat_history: Optional[List[ChatMessage]] = None, *,
                     streaming: bool = False) -> TurnRequest:
        """What a turn of this engine asks its port to load for ``message`` (the history window it reads, its owner
        and whether its memory is read)."""
        window = self._rewriter.history_window if self.rephrase_question else None
        return TurnRequest(self.conversation_id, message_text(message), window=window, chat_history=chat_history,
                           streaming=streaming, owner=self.owner, memory=self.reads_memory)

    # --- one turn, four ways: load through the port, then answer the loaded turn --------------------------------
    @span_when_observed(dispatcher)
    def chat(self, message: str, chat_history: Optional[List[ChatMessage]] = None) -> AgentChatResponse:
        return self.chat_turn(self._port.load(self.turn_request(message, chat_history)))

    @span_when_observed(dispatcher)
    async def achat(self, message: str, chat_history: Optional[List[ChatMessage]] = None) -> AgentChatResponse:
        return await self.achat_turn(await self._port.aload(self.turn_request(message, chat_history)))

    @span_when_observed(dispatcher)
    def stream_chat(self, message: str, chat_history: Optional[List[ChatMessage]] = None) -> ConvRAGStreamingResponse:
        return self.stream_turn(self._port.load(self.turn_request(message, chat_history, streaming=True)))

    @span_when_observed(dispatcher)
    async def astream_chat(
        self, message: str, chat_history: Optional[List[ChatMessage]] = None
    ) -> ConvRAGStreamingResponse:
        return await self.astream_turn(await self._port.aload(self.turn_request(message, chat_history,
                                                                                 streaming=True)))

    def chat_turn(self, context: TurnContext) -> AgentChatResponse:
        """Answer a turn the port loaded (``port.load(engine.turn_request(...))``: a service loads it first)."""
        turn = Turn.start(context)
        with self._failing(turn):
            self._apply_rewrite(turn)
            self._apply_retrieval_and_memory(turn)
            query = self._fit(turn)
            response = None if query is None else self._answer(turn, query, streaming=False)
            text = self._no_docs_reply() if response is None else self._recovered(turn, query, read_text(response))
        self._commit(turn, "complete", text, None, response)
        return self._chat_response(turn, text, response)

    async def achat_turn(self, context: TurnContext) -> AgentChatResponse:
        """Async twin of :meth:`chat_turn`."""
        turn = Turn.start(context)
        async with self._afailing(turn):
            await self._aapply_rewrite(turn)
            await self._aapply_retrieval_and_memory(turn)
            query = self._fit(turn)
            response = None if query is None else await self._aanswer(turn, query, streaming=False)
            text = self._no_docs_reply() if response is None else await self._arecovered(
                turn, query, await aread_text(response))
        await self._acommit(turn, "complete", text, None, response)
        return self._chat_response(turn, text, response)

    def stream_turn(self, context: TurnContext) -> ConvRAGStreamingResponse:
        """The streamed twin of :meth:`chat_turn` (the turn's pipeline: :class:`~.stream_pipeline.TurnStream`)."""
        turn = Turn.start(context)
        with self._failing(turn):
            self._apply_rewrite(turn)
            self._apply_retrieval_and_memory(turn)
            query = self._fit(turn)
            response = None if query is None else self._answer(turn, query, streaming=True)
        raw, hold = self._stream_parts(turn, query, response, is_async=False)
        stream = TurnStream(hold, deltas=raw, recover=lambda held: self._recovered(turn, query, held, hold.verdict),
                            commit=lambda status, text, error: self._commit(turn, status, text, error, response))
        return self._stream_response(turn, stream, is_async=False)

    async def astream_turn(self, context: TurnContext) -> ConvRAGStreamingResponse:
        """Async twin of :meth:`stream_turn`."""
        turn = Turn.start(context)
        async with self._afailing(turn):
            await self._aapply_rewrite(turn)
            await self._aapply_retrieval_and_memory(turn)
            query = self._fit(turn)
            response = None if query is None else await self._aanswer(turn, query, streaming=True)
        raw, hold = self._stream_parts(turn, query, response, is_async=True)

        async def arecover(held: str) -> str:
            return await self._arecovered(turn, query, held, hold.verdict)  # type: ignore[arg-type]

        async def acommit(status: str, text: str, error: Optional[BaseException]) -> None:
            await self._acommit(turn, status, text, error, response)

        stream = TurnStream(hold, adeltas=raw, arecover=arecover, acommit=acommit,
                            commit=lambda status, text, error: self._commit(turn, status, text, error, response))
        return self._stream_response(turn, stream, is_async=True)

    # --- the steps -----------------------------------------------------------------------------------------------
    @contextmanager
    def _failing(self, turn: Turn) -> Iterator[None]:
        """A step that raises commits the turn as ``error`` (the user message stays) and re-raises."""
        try:
            yield
        except Exception as e:
            self._commit(turn, "error", "", e, None)
            raise

    @asynccontextmanager
    async def _afailing(self, turn: Turn) -> AsyncIterator[None]:
        """Async twin of :meth:`_failing`."""
        try:
            yield
        except Exception as e:
            await self._acommit(turn, "error", "", e, None)
            raise

    def _commit(self, turn: Turn, status: str, text: str, error: Optional[BaseException], response: Any) -> None:
        self._port.commit(turn.outcome(status, text, error, response, self.answer.support_scorer))
        turn.ended()

    async def _acommit(self, turn: Turn, status: str, text: str, error: Optional[BaseException],
                       response: Any) -> None:
        await self._port.acommit(turn.outcome(status, text, error, response, self.answer.support_scorer))
        turn.ended()

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

    def _memory_to_read(self, turn: Turn) -> bool:
        """Whether this turn recalls and fits memory (else why not, on the record)."""
        if not self.reads_memory:
            return False
        if turn.memory is None:
            turn.memory_skipped("the port loaded no memory for this turn (a port that does not load it, or a "
                                "regeneration it loaded without)")
            return False
        return True

    def _apply_retrieval_and_memory(self, turn: Turn) -> None:
        """Retrieve the evidence and recall earlier messages, at once when both run: each reads only the retrieval
        query (after the rewrite: it names what the follow-up means), whose embedding is computed once before they
        start. A retrieval error is the turn's (the recall's outcome is dropped, as if it had not run); else a recall
        error is."""
        if not self._memory_to_read(turn):
            self._apply_retrieval(turn)
            return
        memory, loaded = self._memory, turn.memory
        assert memory is not None and loaded is not None
        if self._retriever is None or not memory.recalls(loaded):
            self._apply_retrieval(turn)
            memory.recall(loaded, turn.retrieval_query)  # no search: records why not
            return
        query = memory.recall_query(turn.retrieval_query)
        run_beside(lambda: self._apply_retrieval(turn), lambda: memory.recall(loaded, query), memory.recall_threads())

    async def _aapply_retrieval_and_memory(self, turn: Turn) -> None:
        """Async twin of :meth:`_apply_retrieval_and_memory`."""
        if not self._memory_to_read(turn):
            await self._aapply_retrieval(turn)
            return
        memory, loaded = self._memory, turn.memory
        assert memory is not None and loaded is not None
        if self._retriever is None or not memory.recalls(loaded):
            await self._aapply_retrieval(turn)
            await memory.arecall(loaded, turn.retrieval_query)
            return
        query = await memory.arecall_query(turn.retrieval_query)
        await arun_beside(self._aapply_retrieval(turn), memory.arecall(loaded, query))

    def _fit(self, turn: Turn) -> Optional[str]:
        """The query to answer, after the token budget kept what fits; None when nothing was retrieved and a fixed
        reply is configured. Without an LLM (or with a query engine) nothing is trimmed."""
        if self.answer.no_docs_reply is not None and self._retriever is not None and not turn.nodes:
            turn.record.status = "no_docs"
            return None
        if self._llm is None or self._query_engine is not None:
            if self._retriever is not None:
                turn.apply_trim(None)
            turn.record.synthesis_query = turn.retrieval_query
            return turn.record.synthesis_query
        question = turn.retrieval_query if self.rephrase_question else turn.question
        turns = [] if self.rephrase_question else group_turns(turn.history)
        format_history = self._rewriter.get_chat_history
        if turn.memory is not None and self.reads_memory:
            return self._fit_memory(turn, question, turns)
        report = message_fit_in(
            question=question, history=[format_history(t) for t in turns],
            chunks=[n.node.get_content(metadata_mode=MetadataMode.LLM) for n in turn.nodes],
            system=self._context_chat.system_text() if self._context_chat is not None
            else system_text(self._synthesizer, self._llm),
            count_tokens=self._count_tokens, context_window=self._llm.metadata.context_window,
            reserved_output=self.reserved_output_tokens, budget_ratio=self.budget.ratio,
            max_context_tokens=self.budget.max_tokens_limit, narrow_chunks=narrow_contents(turn.nodes),
        )
        turn.nodes = narrowed_nodes(turn.nodes, report.narrowed)  # widened passages the budget cut back
        turn.apply_trim(report)
        turn.answer_history = [m for i in report.kept_history for m in turns[i]]
        if turn.answer_history and self._context_chat is None and not self.rephrase_question:
            question = self._answer_prompt.format(chat_history=format_history(turn.answer_history),
                                                  question=question)
        turn.record.synthesis_query = question
        return question

    def _fit_memory(self, turn: Turn, question: str, turns: List[List[ChatMessage]]) -> str:
        """:meth:`_fit` with memory: every block under one budget (:func:`~.memory_step.fit_with_memory`); the kept
        memory goes into the system message (context modes) or before the question (``condense_question``)."""
        assert self._llm is not None and turn.memory is not None
        format_history = self._rewriter.get_chat_history
        placement = "system" if self._context_chat is not None else "query"
        fit = fit_with_memory(
            loaded=turn.memory, question=question, placement=placement,
            system=self._context_chat.system_text() if self._context_chat is not None
            else system_text(self._synthesizer, self._llm),
            chunks=[n.node.get_content(metadata_mode=MetadataMode.LLM) for n in turn.nodes],
            history=[format_history(t) for t in turns], count_tokens=self._count_tokens,
            context_window=self._llm.metadata.context_window, reserved_output=self.reserved_output_tokens,
            budget_ratio=self.budget.ratio, max_context_tokens=self.budget.max_tokens_limit,
            narrow_chunks=narrow_contents(turn.nodes))
        turn.nodes = narrowed_nodes(turn.nodes, fit.report.narrowed)  # widened passages the budget cut back
        turn.apply_memory_fit(fit)
        turn.answer_history = [m for i in fit.report.kept_history for m in turns[i]]
        if self._context_chat is None:
            if turn.answer_history and not self.rephrase_question:
                question = self._answer_prompt.format(chat_history=format_history(turn.answer_history),
                                                      question=question)
            turn.plain_query = question
            if fit.memory_text:
                question = MEMORY_QUERY_PROMPT.format(memory=fit.memory_text, question=question)
        turn.record.synthesis_query = question
        return question

    def _synthesizer_for(self, turn: Turn, streaming: bool) -> BaseSynthesizer:
        if self._context_chat is not None:
            return self._context_chat.synthesizer(turn.answer_history, streaming=streaming, memory=turn.memory_text)
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

    def _stream_parts(self, turn: Turn, query: Optional[str], response: Any, is_async: bool) -> Tuple[Any, StreamHold]:
        """The streamed answer's raw deltas and its one hold, with this turn's :class:`~.fallback.AnswerRule` (the
        fixed no-docs reply: one delta, nothing held)."""
        if response is None:
            reply = self._no_docs_reply()
            return (_aiter_one(reply) if is_async else iter([reply])), StreamHold()
        raw, hold = stream_parts(response, is_async)
        fallback = self._fallback
        rule = turn.answer_rule(fallback.judged_question(turn.checked_query(query)), fallback.echo_rules) \
            if query is not None else None
        if rule is not None:
            hold.add_rule(rule)
        return raw, hold

    def _recovered(self, turn: Turn, query: str, text: str, reason: Optional[str] = None) -> str:
        """``text``, or the answer shown instead when it is empty, only citation markers or ``query`` restated
        (chat/fallback.py; ``reason``: why, when the stream's hold has judged it already)."""
        checked = turn.checked_query(query)
        if reason is None:
            reason = turn.recovery_reason(text, self._fallback.judged_question(checked), self._fallback.echo_rules)
        if reason is None:
            return text
        with watching(turn.output):  # the retry's call is watched too (an answer it cut at max_tokens is flagged)
            recovered = self._fallback.recover(self._synthesizer_for(turn, False), query, turn.nodes, reason,
                                               question=checked)
        return turn.apply_recovered(recovered, reason, text)

    async def _arecovered(self, turn: Turn, query: str, text: str, reason: Optional[str] = None) -> str:
        """Async twin of :meth:`_recovered`."""
        checked = turn.checked_query(query)
        if reason is None:
            reason = turn.recovery_reason(text, self._fallback.judged_question(checked), self._fallback.echo_rules)
        if reason is None:
            return text
        with watching(turn.output):
            recovered = await self._fallback.arecover(self._synthesizer_for(turn, False), query, turn.nodes, reason,
                                                      question=checked)
        return turn.apply_recovered(recovered, reason, text)

    def _no_docs_reply(self) -> str:
        """The fixed reply when nothing was retrieved (only asked for when ``no_docs_reply`` is set)."""
        reply = self.answer.no_docs_reply
        return reply if reply is not None else ""

    def _chat_response(self, turn: Turn, text: str, response: Any) -> AgentChatResponse:
        return turn.chat_response(text, response, sources=self.answer.return_source_nodes,
                                  generated_question=self.answer.return_generated_question)

    def _stream_response(self, turn: Turn, stream: TurnStream, is_async: bool) -> ConvRAGStreamingResponse:
        return turn.stream_response(stream, is_async=is_async, sources=self.answer.return_source_nodes,
                                    generated_question=self.answer.return_generated_question)


def check_owner(owner: Any) -> str:
    """``owner`` as given: a non-empty string (memory rows are read and written as this owner's)."""
    if not isinstance(owner, str) or not owner:
        raise ConfigurationError(f"owner must be a non-empty string (a user id), got {owner!r}")
    return owner


async def _aiter_one(text: str) -> AsyncIterator[str]:
    yield text


def built_synthesizer_options(answer: AnswerOptions) -> List[str]:
    """The :class:`~.options.AnswerOptions` fields that configure the synthesizers the engine builds and differ
    from their defaults (refused beside ``synthesizer=`` / ``query_engine=``)."""
    default = AnswerOptions()
    return [name for name in ("response_mode", "citations", "citation_mode", "embed_model", "support_scorer")
            if getattr(answer, name) != getattr(default, name)]
