"""Model resolution: which LLM (:mod:`.llm`: ``configured_llm``, ``resolve_llm``, ``OpenAICompatible``; a local GGUF
served by :mod:`.llamacpp_server`), its limits (:mod:`.model_limits`; how its calls finished: :mod:`.output_watch`)
and which embedding model (:mod:`.embedding`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "DEFAULT_CONTEXT_WINDOW": "model_limits",
    "DEFAULT_MAX_TOKENS": "model_limits",
    "DEFAULT_TIMEOUT_S": "model_limits",
    "ENV_CONTEXT_WINDOW": "model_limits",
    "ENV_MAX_TOKENS": "model_limits",
    "ENV_TIMEOUT": "model_limits",
    "ModelLimits": "model_limits",
    "OutputWatch": "output_watch",
    "WatchedOpenAI": "llm",
    "probe_server": "model_limits",
    "resolve_limits": "model_limits",
    "DEFAULT_OPENAI_MODEL": "llm",
    "ENV_API_KEY": "llm",
    "ENV_BASE_URL": "llm",
    "ENV_EMBED_MODEL": "embedding",
    "ENV_LLM_MODEL": "llm",
    "LlamaServer": "llamacpp_server",
    "OpenAICompatible": "llm",
    "configured_llm": "llm",
    "resolve_embed_model": "embedding",
    "resolve_llm": "llm",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.config.embedding import ENV_EMBED_MODEL, resolve_embed_model
    from llama_index_convrag.config.llamacpp_server import LlamaServer
    from llama_index_convrag.config.llm import (DEFAULT_OPENAI_MODEL, ENV_API_KEY, ENV_BASE_URL, ENV_LLM_MODEL,
                                                OpenAICompatible, WatchedOpenAI, configured_llm, resolve_llm)
    from llama_index_convrag.config.model_limits import (DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT_S,
                                                         ENV_CONTEXT_WINDOW, ENV_MAX_TOKENS, ENV_TIMEOUT, ModelLimits,
                                                         probe_server, resolve_limits)
    from llama_index_convrag.config.output_watch import OutputWatch
