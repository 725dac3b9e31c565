"""Deterministic test doubles: a scripted LLM and a local OpenAI-compatible HTTP server (loopback only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "LocalOpenAIServer": "openai_server",
    "echo_chat": "openai_server",
    "LLMCall": "scripted_llm",
    "ScriptedFailure": "scripted_llm",
    "ScriptedLLM": "scripted_llm",
    "split_deltas": "scripted_llm",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.testing.openai_server import LocalOpenAIServer, echo_chat
    from llama_index_convrag.testing.scripted_llm import LLMCall, ScriptedFailure, ScriptedLLM, split_deltas
