"""Which LLM: the one module that decides it.

:func:`configured_llm` is the rule of every component (the synthesizers, ``ConvRAGChatEngine.from_defaults``, the
index's ``as_query_engine`` / ``as_chat_engine``): the LLM passed, else the one assigned to ``Settings.llm``, else
``None`` (core's default-building getter is never called). :func:`resolve_llm` adds the environment for the CLI and
``build_chat_engine``: explicit argument, then ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``, else ``None``. Nothing here
builds an OpenAI client unless an API key or a base URL was given; with neither, callers run retrieval-only. A local
GGUF is served by :class:`~.llamacpp_server.LlamaServer` (``convrag --gguf``) and reached as any
OpenAI-compatible server (:class:`OpenAICompatible`).
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

from llama_index.core.base.llms.types import LLMMetadata
from llama_index.core.llms.llm import LLM
from llama_index.core.settings import Settings
from llama_index.llms.openai import OpenAI

from llama_index_convrag._env import pick

ENV_API_KEY = "OPENAI_API_KEY"
ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_LLM_MODEL = "CONVRAG_LLM_MODEL"

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_CONTEXT_WINDOW = 8192


class OpenAICompatible(OpenAI):
    """OpenAI client for any OpenAI-compatible server (vLLM, llama.cpp, Ollama) and any model name.

    LlamaIndex's ``OpenAI`` raises for model names it does not know; here the window is a field.
    """

    context_window: int = DEFAULT_CONTEXT_WINDOW
    function_calling: bool = True

    @classmethod
    def class_name(cls) -> str:
        return "OpenAICompatible"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens if self.max_tokens is not None else -1,
            is_chat_model=True,
            is_function_calling_model=self.function_calling,
            model_name=self.model,
        )


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
    env: Optional[Mapping[str, str]] = None,
) -> Optional[LLM]:
    """The LLM to answer with, or ``None`` when none was configured (retrieval-only mode)."""
    if llm is not None:
        return llm
    env = os.environ if env is None else env
    key = pick(api_key, env, ENV_API_KEY)
    url = pick(base_url, env, ENV_BASE_URL)
    if key is None and url is None:
        return None
    name = pick(model, env, ENV_LLM_MODEL)
    if url is None:
        return OpenAI(model=name if name is not None else DEFAULT_OPENAI_MODEL, api_key=key)
    return OpenAICompatible(
        model=name if name is not None else DEFAULT_OPENAI_MODEL,
        api_key=key if key is not None else "not-needed",
        api_base=url,
        context_window=context_window if context_window is not None else DEFAULT_CONTEXT_WINDOW,
    )
