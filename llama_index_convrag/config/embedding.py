"""Which embedding model: explicit object, then ``spec`` / ``CONVRAG_EMBED_MODEL``, else the local model."""

from __future__ import annotations

import os
from typing import Mapping, Optional

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.settings import Settings

from llama_index_convrag._env import pick
from llama_index_convrag.config.llm import ENV_API_KEY, ENV_BASE_URL
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.errors import ConfigurationError

ENV_EMBED_MODEL = "CONVRAG_EMBED_MODEL"
DEFAULT_OPENAI_EMBED_MODEL = "text-embedding-3-small"
LOCAL_EMBED = "local"
EMBED_PROVIDERS = ("local", "openai")


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


def configured_embed_model(embed_model: Optional[BaseEmbedding] = None) -> BaseEmbedding:
    """``embed_model`` if given, else the model assigned to ``Settings.embed_model`` (its getter, which builds an
    OpenAI client, is not called), else :func:`resolve_embed_model` (``CONVRAG_EMBED_MODEL``, else the local model):
    the LLM's rule (``config/llm.py``, ``configured_llm``) for the embedding model."""
    if embed_model is not None:
        return embed_model
    assigned = Settings._embed_model
    return assigned if assigned is not None else resolve_embed_model()
