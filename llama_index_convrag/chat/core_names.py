"""LlamaIndex core's chat engine names, served by :class:`~.engine.ConvRAGChatEngine`: swapping the import
(``from llama_index_convrag.chat import CondensePlusContextChatEngine``) is enough where core's class was used.

Each class takes core's ``from_defaults`` signature for its mode and builds our engine with core's defaults where
they decide what the LLM is sent (:func:`core_rewrite`, :data:`CORE_ANSWER`): core's prompts for that class (imported
from core), a condense call for every follow-up with history (no rewrite trigger), the whole remembered conversation
up to core's memory bound (the LLM's window less 256 tokens), no citations. What stays ours (the conversation store,
cleaned condense replies, no hidden ``Settings.llm`` default, ...) is listed in docs/COMPATIBILITY.md, each with its
test in ``tests/differential``. Keywords beyond core's go to :meth:`ConvRAGChatEngine.from_defaults`
(``conversation_store=``, ``conversation_id=``, ``synthesizer=``, ``budget=``); a ``rewrite=`` or ``answer=`` given
replaces the class's options of that group whole (start from :func:`core_rewrite` / :data:`CORE_ANSWER` with
``dataclasses.replace`` to keep core's).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any, List, Optional, Type, Union

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine.condense_plus_context import DEFAULT_CONDENSE_PROMPT_TEMPLATE
from llama_index.core.llms.llm import LLM
from llama_index.core.memory import BaseMemory, Memory
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate

from llama_index_convrag.chat.engine import ConvRAGChatEngine
from llama_index_convrag.chat.options import AnswerOptions, RewriteOptions, options_of
from llama_index_convrag.config.llm import configured_llm
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.prompts.chat import CORE_CONDENSE_QUESTION_PROMPT

PromptArg = Union[str, BasePromptTemplate]

EVERY_TURN = sys.maxsize
"""``RewriteOptions.last_n_turns`` of these classes: core condenses with all its memory holds, not a window of turns."""
MEMORY_RESERVE = 256
"""Core's chat memory holds the LLM's context window less this many tokens (``from_defaults`` of each engine)."""
CORE_ANSWER = AnswerOptions(citations=False)
"""The answers of the classes that answer with our synthesizers: core's (no citations)."""


def core_rewrite(llm: Optional[LLM]) -> RewriteOptions:
    """The rewrite of these classes: a condense call for every follow-up with history (no trigger), over the whole
    conversation up to core's memory bound for ``llm`` (resolved as the engine resolves it)."""
    llm = configured_llm(llm)
    bound = max(1, llm.metadata.context_window - MEMORY_RESERVE) if llm is not None else None
    options = RewriteOptions(trigger=None, last_n_turns=EVERY_TURN)
    return replace(options, max_history_tokens=bound) if bound is not None else options


def rewrite_options(kwargs: Any, llm: Optional[LLM]) -> RewriteOptions:
    """``kwargs["rewrite"]`` when given (taken out of ``kwargs``), else :func:`core_rewrite`."""
    given = kwargs.pop("rewrite", None)
    return options_of(RewriteOptions, given, "rewrite") if given is not None else core_rewrite(llm)


def as_prompt(prompt: Optional[PromptArg]) -> Optional[BasePromptTemplate]:
    """Core takes a template's text or a template."""
    return PromptTemplate(prompt) if isinstance(prompt, str) else prompt


def check_memory_cls(memory_cls: Type[BaseMemory]) -> None:
    """Core builds the history's memory from ``memory_cls``; here the conversation store keeps the history, so only
    core's default is accepted."""
    if memory_cls is not Memory:
        raise ConfigurationError(f"memory_cls={memory_cls.__name__} is not used: the conversation store keeps the "
                                 "history (pass conversation_store=..., or memory=... to seed it)")


def answer_options(kwargs: Any, verbose: bool = False, default: AnswerOptions = CORE_ANSWER,
                   **fields: Any) -> AnswerOptions:
    """The class's answer options: ``kwargs["answer"]`` when given (taken out of ``kwargs``), else ``default``; with
    the ``fields`` core's arguments set (those given). ``verbose``: core prints the condensed question; here each
    response carries it (``metadata["generated_question"]``)."""
    given = kwargs.pop("answer", None)
    base = options_of(AnswerOptions, given, "answer") if given is not None else default
    chosen = {name: value for name, value in fields.items() if value is not None and value != []}
    if verbose:
        chosen["return_generated_question"] = True
    return replace(base, **chosen)


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
        check_memory_cls(memory_cls)
        prompt = condense_question_prompt if condense_question_prompt is not None else CORE_CONDENSE_QUESTION_PROMPT
        # the query engine writes the answer (its synthesizer's settings are its own): no answer options of ours
        answer = answer_options(kwargs, verbose, AnswerOptions(), prefix_messages=prefix_messages)
        return super().from_defaults(
            llm=llm, query_engine=query_engine, chat_mode="condense_question", chat_history=chat_history,
            memory=memory, system_prompt=system_prompt, condense_question_prompt=prompt,
            rewrite=rewrite_options(kwargs, llm), answer=answer, **kwargs)


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
        rewrite = rewrite_options(kwargs, llm)
        if skip_condense:
            rewrite = replace(rewrite, strategy="none")
        answer = answer_options(kwargs, verbose, context_prompt=context_prompt,
                                context_refine_prompt=context_refine_prompt)
        return super().from_defaults(
            retriever, llm, chat_mode="condense_plus_context", chat_history=chat_history, memory=memory,
            system_prompt=system_prompt, condense_question_prompt=prompt, node_postprocessors=node_postprocessors,
            rewrite=rewrite, answer=answer, **kwargs)


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
        prefix = list(prefix_messages) if prefix_messages is not None else []
        if prefix and prefix[0].role == MessageRole.SYSTEM:
            system_prompt, prefix = str(prefix[0].content), prefix[1:]
        answer = answer_options(kwargs, context_prompt=context_template,
                                context_refine_prompt=context_refine_template, prefix_messages=prefix)
        return super().from_defaults(
            retriever, llm, chat_mode="context", chat_history=chat_history, memory=memory,
            system_prompt=system_prompt, node_postprocessors=node_postprocessors,
            rewrite=rewrite_options(kwargs, llm), answer=answer, **kwargs)
