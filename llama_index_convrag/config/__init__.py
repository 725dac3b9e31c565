"""Model resolution: which LLM (:mod:`.llm`: ``configured_llm``, ``resolve_llm``, ``OpenAICompatible``; a local GGUF
served by :mod:`.llamacpp_server`) and which embedding model (:mod:`.embedding`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "DEFAULT_CONTEXT_WINDOW": "llm",
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
    from llama_index_convrag.config.llm import (DEFAULT_CONTEXT_WINDOW, DEFAULT_OPENAI_MODEL, ENV_API_KEY, ENV_BASE_URL,
                                                ENV_LLM_MODEL, OpenAICompatible, configured_llm, resolve_llm)
