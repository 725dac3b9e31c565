"""Which LLM: the one module that decides it.

:func:`configured_llm` is the rule of every component (the synthesizers, ``ConvRAGChatEngine.from_defaults``, the
index's ``as_query_engine`` / ``as_chat_engine``): the LLM passed, else the one assigned to ``Settings.llm``, else
``None`` (core's default-building getter is never called). :func:`resolve_llm` adds the environment for the CLI and
``build_chat_engine``: explicit argument, then ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``, else ``None``. Nothing here
builds an OpenAI client unless an API key or a base URL was given; with neither, callers run retrieval-only. A local
GGUF is served by :class:`~.llamacpp_server.LlamaServer` (``convrag --gguf``) and reached as any
OpenAI-compatible server (:class:`OpenAICompatible`).

The limits (context window, ``max_tokens`` sent with every call, timeout) follow :mod:`.model_limits`: explicit,
then the environment, then what the server reports, then the defaults. Both clients report how each call finished
to the open :class:`~.output_watch.OutputWatch` (a reply cut at the output limit is not a complete answer).
"""

from __future__ import annotations

import logging
import os
from typing import Any, AsyncIterator, Callable, Dict, Iterator, Mapping, Optional, Sequence

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, LLMMetadata
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms.llm import LLM
from llama_index.core.settings import Settings
from llama_index.llms.openai import OpenAI

from llama_index_convrag._env import pick
from llama_index_convrag.config.model_limits import (DEFAULT_CONTEXT_WINDOW, ModelLimits, needs_probe,
                                                     probe_server, probe_tokenizer, request_json, resolve_limits,
                                                     token_count, tokenize_body)
from llama_index_convrag.config.tokens import count_tokens as local_count
from llama_index_convrag.config.output_watch import (OutputWatch, current_watch, finish_reason, produced_nothing,
                                                     report_finish)

ENV_API_KEY = "OPENAI_API_KEY"
ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_LLM_MODEL = "CONVRAG_LLM_MODEL"

logger = logging.getLogger(__name__)

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
#: Retries of a failed request (a timeout included): one, so a dead server costs two timeouts, not four.
DEFAULT_MAX_RETRIES = 1


class WatchedOpenAI(OpenAI):
    """LlamaIndex's ``OpenAI`` that reports each call's ``finish_reason`` and ``max_tokens`` to the open
    :class:`~.output_watch.OutputWatch` (:mod:`.output_watch`); ``limit_sources`` says where its limits came from."""

    limit_sources: Dict[str, str] = Field(default_factory=dict,
                                          description="Where each limit came from (option, env, server, default).")

    @classmethod
    def class_name(cls) -> str:
        return "WatchedOpenAI"

    def limits(self) -> ModelLimits:
        """The limits this client runs under."""
        return ModelLimits(context_window=self.metadata.context_window,
                           max_tokens=self.max_tokens if self.max_tokens is not None else -1,
                           timeout=float(self.timeout), sources=dict(self.limit_sources))

    def _chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        response = super()._chat(messages, **kwargs)
        report_finish(current_watch(), finish_reason(response.raw), self.max_tokens, empty=produced_nothing(response))
        return response

    async def _achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        response = await super()._achat(messages, **kwargs)
        report_finish(current_watch(), finish_reason(response.raw), self.max_tokens, empty=produced_nothing(response))
        return response

    def _stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Iterator[ChatResponse]:
        return self._watched(super()._stream_chat(messages, **kwargs), current_watch())

    async def _astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> AsyncIterator[ChatResponse]:
        return self._awatched(await super()._astream_chat(messages, **kwargs), current_watch())

    def _watched(self, gen: Iterator[ChatResponse], watch: Optional[OutputWatch]) -> Iterator[ChatResponse]:
        reason, last = None, None
        for last in gen:
            reason = finish_reason(last.raw) or reason
            yield last
        self._report_stream(watch, reason, last)

    async def _awatched(self, gen: AsyncIterator[ChatResponse],
                        watch: Optional[OutputWatch]) -> AsyncIterator[ChatResponse]:
        reason, last = None, None
        async for last in gen:
            reason = finish_reason(last.raw) or reason
            yield last
        self._report_stream(watch, reason, last)

    def _report_stream(self, watch: Optional[OutputWatch], reason: Optional[str], last: Optional[ChatResponse]) -> None:
        """A stream's end: its finish reason and whether its accumulated message (``last``) holds anything."""
        report_finish(watch, reason, self.max_tokens, streamed=True, empty=last is None or produced_nothing(last))


class OpenAICompatible(WatchedOpenAI):
    """OpenAI client for any OpenAI-compatible server (vLLM, llama.cpp, Ollama) and any model name.

    LlamaIndex's ``OpenAI`` raises for model names it does not know; here the window is a field.
    """

    context_window: int = DEFAULT_CONTEXT_WINDOW
    function_calling: bool = True
    tokenizer_url: Optional[str] = Field(default=None, description="The server's token-count endpoint, if any.")
    tokenizer_kind: Optional[str] = Field(default=None, description="Its request shape (model_limits.TOKENIZE_ENDPOINTS).")

    @classmethod
    def class_name(cls) -> str:
        return "OpenAICompatible"

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as the served model counts them (its token-count endpoint); tiktoken's count when the
        server has none or does not answer."""
        if self.tokenizer_url is None or self.tokenizer_kind is None or not text:
            return local_count(text)
        counted = token_count(request_json(self.tokenizer_url, self.api_key, float(self.timeout),
                                           tokenize_body(self.tokenizer_kind, text, self.model)))
        if counted is None:
            logger.warning("the LLM server's token count at %s did not answer; counting with tiktoken",
                           self.tokenizer_url)
            return local_count(text)
        return counted

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens if self.max_tokens is not None else -1,
            is_chat_model=True,
            is_function_calling_model=self.function_calling,
            model_name=self.model,
        )


def token_counter(llm: Optional[LLM]) -> Optional[Callable[[str], int]]:
    """The served model's own token counter (an :class:`OpenAICompatible` whose server has a token-count endpoint),
    else None (callers count with their tokenizer)."""
    if isinstance(llm, OpenAICompatible) and llm.tokenizer_url is not None:
        return llm.count_tokens
    return None


def configured_llm(llm: Optional[LLM]) -> Optional[LLM]:
    """``llm`` if given, else the LLM assigned to ``Settings.llm``, else ``None`` (the getter is not called)."""
    return llm if llm is not None else Settings._llm


def resolve_llm(
    llm: Optional[LLM] = None,
    *,
    api_key: Optional[str] = None,
    base_url: Optional[str] = None,
    model: Optional[str] = None,
    context_window: Optional[int] = None,
    max_tokens: Optional[int] = None,
    timeout: Optional[float] = None,
    env: Optional[Mapping[str, str]] = None,
    probe: bool = True,
) -> Optional[LLM]:
    """The LLM to answer with, or ``None`` when none was configured (retrieval-only mode).

    ``context_window`` / ``max_tokens`` / ``timeout``: explicit limits; the rest come from the environment, then
    (``probe=True``, an OpenAI-compatible server) what the server reports, then the defaults (:mod:`.model_limits`).
    """
    if llm is not None:
        return llm
    env = os.environ if env is None else env
    key = pick(api_key, env, ENV_API_KEY)
    url = pick(base_url, env, ENV_BASE_URL)
    if key is None and url is None:
        return None
    name = pick(model, env, ENV_LLM_MODEL)
    name = name if name is not None else DEFAULT_OPENAI_MODEL
    if url is None:  # OpenAI itself: the window is the model's, from LlamaIndex's table
        window = OpenAI(model=name, api_key=key).metadata.context_window
        limits = resolve_limits(context_window=window, max_tokens=max_tokens, timeout=timeout, env=env)
        return WatchedOpenAI(model=name, api_key=key, max_tokens=limits.max_tokens, timeout=limits.timeout,
                             max_retries=DEFAULT_MAX_RETRIES, limit_sources={**limits.sources,
                                                                             "context_window": "model table"})
    wait = resolve_limits(context_window=context_window, max_tokens=max_tokens, timeout=timeout, env=env).timeout
    # probes wait as long as a call would: a busy local server answers them after the generation in progress
    server = probe_server(url, name, api_key=key, timeout=wait) \
        if probe and needs_probe(context_window, max_tokens, env) else None
    limits = resolve_limits(context_window=context_window, max_tokens=max_tokens, timeout=timeout, env=env,
                            server=server)
    tokenizer = probe_tokenizer(url, name, api_key=key, timeout=wait) if probe else None
    return OpenAICompatible(
        model=name, api_key=key if key is not None else "not-needed", api_base=url,
        context_window=limits.context_window, max_tokens=limits.max_tokens, timeout=limits.timeout,
        max_retries=DEFAULT_MAX_RETRIES, limit_sources=limits.sources,
        tokenizer_url=None if tokenizer is None else tokenizer[0],
        tokenizer_kind=None if tokenizer is None else tokenizer[1],
    )
