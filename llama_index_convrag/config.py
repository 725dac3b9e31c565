"""Resolve the LLM and the embedding model: explicit arguments, then environment, then defaults.

Nothing here builds an OpenAI client unless an API key or a base URL was given (as an argument or in the
environment). With neither, :func:`resolve_llm` returns ``None`` and callers run retrieval-only. Milvus targets
moved to :mod:`llama_index_convrag.milvus.client`; their old names here still resolve (lazily).
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Mapping, Optional

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import LLMMetadata
from llama_index.core.llms.llm import LLM
from llama_index.llms.openai import OpenAI

from llama_index_convrag._env import pick
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.errors import ConfigurationError

ENV_API_KEY = "OPENAI_API_KEY"
ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_LLM_MODEL = "CONVRAG_LLM_MODEL"
ENV_EMBED_MODEL = "CONVRAG_EMBED_MODEL"

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_OPENAI_EMBED_MODEL = "text-embedding-3-small"
DEFAULT_CONTEXT_WINDOW = 8192
LOCAL_EMBED = "local"
EMBED_PROVIDERS = ("local", "openai")


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


def resolve_embed_model(
    embed_model: Optional[BaseEmbedding] = None,
    *,
    spec: Optional[str] = None,
    api_key: Optional[str] = None,
    base_url: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
) -> BaseEmbedding:
    """The embedding model: explicit object, else ``spec`` / ``CONVRAG_EMBED_MODEL``, else the local model.

    ``spec`` is ``"local"`` or ``"openai[:model-name]"``. The local model is the default even when an API key is
    set, so that a key in the environment never silently changes the vectors of an existing collection.
    """
    if embed_model is not None:
        return embed_model
    env = os.environ if env is None else env
    spec = pick(spec, env, ENV_EMBED_MODEL)
    provider, _, name = (spec if spec is not None else LOCAL_EMBED).partition(":")
    if provider not in EMBED_PROVIDERS:
        raise ConfigurationError(f"embedding provider must be one of {list(EMBED_PROVIDERS)}, got {provider!r}")
    if provider == LOCAL_EMBED:
        return LocalMiniLMEmbedding()
    from llama_index.embeddings.openai import OpenAIEmbedding

    key = pick(api_key, env, ENV_API_KEY)
    url = pick(base_url, env, ENV_BASE_URL)
    if key is None and url is None:
        raise ConfigurationError(
            f"embedding spec {spec!r} needs {ENV_API_KEY} or {ENV_BASE_URL} (or api_key/base_url arguments)"
        )
    return OpenAIEmbedding(
        model_name=name if name else DEFAULT_OPENAI_EMBED_MODEL,
        api_key=key if key is not None else "not-needed",
        api_base=url,
    )


#: Names that moved to :mod:`llama_index_convrag.milvus.client` and stay importable from here.
_MOVED_TO_MILVUS = frozenset({"MilvusTarget", "resolve_milvus", "default_milvus_uri", "ENV_MILVUS_URI",
                              "ENV_MILVUS_TOKEN"})


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_MILVUS:
        return getattr(importlib.import_module("llama_index_convrag.milvus.client"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
