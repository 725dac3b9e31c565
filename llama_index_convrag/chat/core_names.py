"""LlamaIndex core's chat engine names, served by :class:`~.engine.ConvRAGChatEngine`: swapping the import
(``from llama_index_convrag.chat import CondensePlusContextChatEngine``) is enough where core's class was used.

Each class takes core's ``from_defaults`` signature for its mode and builds our engine with core's defaults where
they decide what the LLM is sent: core's prompts for that class (imported from core), a condense call for every
follow-up with history (no rewrite trigger), the whole remembered conversation up to core's memory bound (the LLM's
window less 256 tokens), no citations. What stays ours (the conversation store, cleaned condense replies, no hidden
``Settings.llm`` default, ...) is listed in docs/COMPATIBILITY.md, each with its test in ``tests/differential``.
Keywords beyond core's go to :meth:`ConvRAGChatEngine.from_defaults` (``conversation_store=``, ...).
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Type, Union

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine.condense_plus_context import DEFAULT_CONDENSE_PROMPT_TEMPLATE
from llama_index.core.llms.llm import LLM
from llama_index.core.memory import BaseMemory, Memory
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate

from llama_index_convrag.chat.engine import ConvRAGChatEngine
from llama_index_convrag.config.llm import configured_llm
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.prompts.chat import CORE_CONDENSE_QUESTION_PROMPT

PromptArg = Union[str, BasePromptTemplate]

EVERY_TURN = sys.maxsize
"""``last_n_turns`` of the drop-in classes: core condenses with everything its memory holds, not a window of turns."""
MEMORY_RESERVE = 256
"""Core's chat memory holds the LLM's context window less this many tokens (``from_defaults`` of each engine)."""


def as_prompt(prompt: Optional[PromptArg]) -> Optional[BasePromptTemplate]:
    """Core takes a template's text or a template."""
    return PromptTemplate(prompt) if isinstance(prompt, str) else prompt


def core_defaults(llm: Optional[LLM], verbose: bool, memory_cls: Type[BaseMemory] = Memory) -> Dict[str, Any]:
    """Our options that make a turn ask what core's engines ask. ``verbose``: core prints the condensed question;
    here every response carries it (``metadata["generated_question"]``). ``memory_cls``: core builds the history's
    memory from it; here the conversation store keeps the history, so only core's default is accepted."""
    if memory_cls is not Memory:
        raise ConfigurationError(f"memory_cls={memory_cls.__name__} is not used: the conversation store keeps the "
                                 "history (pass conversation_store=..., or memory=... to seed it)")
    llm = configured_llm(llm)
    options: Dict[str, Any] = {"rewrite_trigger": False, "last_n_turns": EVERY_TURN}
    if llm is not None:
        options["max_rewrite_history_tokens"] = max(1, llm.metadata.context_window - MEMORY_RESERVE)
    if verbose:
        options["return_generated_question"] = True
    return options


def merged(ours: Dict[str, Any], given: Dict[str, Any]) -> Dict[str, Any]:
    """``ours`` overridden by what the caller passed (their keywords win)."""
    return {**ours, **given}


class CondenseQuestionChatEngine(ConvRAGChatEngine):
    """Core's ``CondenseQuestionChatEngine``: each follow-up condensed into a standalone question, which the query
    engine answers."""

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        query_engine: BaseQueryEngine,
        condense_question_prompt: Optional[BasePromptTemplate] = None,
        chat_history: Optional[List[ChatMessage]] = None,
        memory: Optional[BaseMemory] = None,
        memory_cls: Type[BaseMemory] = Memory,
        verbose: bool = False,
        system_prompt: Optional[str] = None,
        prefix_messages: Optional[List[ChatMessage]] = None,
        llm: Optional[LLM] = None,
        **kwargs: Any,
    ) -> "ConvRAGChatEngine":
        """Core's signature; ``condense_question_prompt`` defaults to core's. ``system_prompt`` and
        ``prefix_messages`` are refused, as core refuses them for this mode."""
        prompt = condense_question_prompt if condense_question_prompt is not None else CORE_CONDENSE_QUESTION_PROMPT
        return super().from_defaults(
            llm=llm, query_engine=query_engine, chat_mode="condense_question", chat_history=chat_history,
            memory=memory, system_prompt=system_prompt, prefix_messages=prefix_messages,
            condense_question_prompt=prompt, **merged(core_defaults(llm, verbose, memory_cls), kwargs))


class CondensePlusContextChatEngine(ConvRAGChatEngine):
    """Core's ``CondensePlusContextChatEngine``: the follow-up condensed for retrieval; the LLM answers from the
    context prompt with the retrieved chunks, the system prompt, the conversation and the user's own words."""

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        retriever: BaseRetriever,
        llm: Optional[LLM] = None,
        chat_history: Optional[List[ChatMessage]] = None,
        memory: Optional[BaseMemory] = None,
        system_prompt: Optional[str] = None,
        context_prompt: Optional[PromptArg] = None,
        context_refine_prompt: Optional[PromptArg] = None,
        condense_prompt: Optional[PromptArg] = None,
        skip_condense: bool = False,
        node_postprocessors: Optional[List[BaseNodePostprocessor]] = None,
        verbose: bool = False,
        **kwargs: Any,
    ) -> "ConvRAGChatEngine":
        """Core's signature; every prompt defaults to core's for this class."""
        prompt = as_prompt(condense_prompt if condense_prompt is not None else DEFAULT_CONDENSE_PROMPT_TEMPLATE)
        return super().from_defaults(
            retriever, llm, chat_mode="condense_plus_context", chat_history=chat_history, memory=memory,
            system_prompt=system_prompt, context_prompt=context_prompt, context_refine_prompt=context_refine_prompt,
            condense_question_prompt=prompt, skip_condense=skip_condense, node_postprocessors=node_postprocessors,
            **merged(core_defaults(llm, verbose), kwargs))


class ContextChatEngine(ConvRAGChatEngine):
    """Core's ``ContextChatEngine``: retrieval with the user's own words; the LLM answers from the context template
    with the retrieved chunks, the system prompt (or prefix messages) and the conversation."""

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        retriever: BaseRetriever,
        chat_history: Optional[List[ChatMessage]] = None,
        memory: Optional[BaseMemory] = None,
        system_prompt: Optional[str] = None,
        prefix_messages: Optional[List[ChatMessage]] = None,
        node_postprocessors: Optional[List[BaseNodePostprocessor]] = None,
        context_template: Optional[PromptArg] = None,
        context_refine_template: Optional[PromptArg] = None,
        llm: Optional[LLM] = None,
        **kwargs: Any,
    ) -> "ConvRAGChatEngine":
        """Core's signature; the templates default to core's for this class. A first prefix message with the system
        role is the system prompt, as in core."""
        if system_prompt is not None and prefix_messages is not None:
            raise ConfigurationError("pass system_prompt= or prefix_messages=, not both (as core)")
        if prefix_messages and prefix_messages[0].role == MessageRole.SYSTEM:
            system_prompt, prefix_messages = str(prefix_messages[0].content), list(prefix_messages[1:])
        return super().from_defaults(
            retriever, llm, chat_mode="context", chat_history=chat_history, memory=memory,
            system_prompt=system_prompt, prefix_messages=prefix_messages or None,
            context_prompt=context_template, context_refine_prompt=context_refine_template,
            node_postprocessors=node_postprocessors, **merged(core_defaults(llm, False), kwargs))
