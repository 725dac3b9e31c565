"""Deterministic test doubles: a scripted LLM and a local OpenAI-compatible HTTP server (loopback only)."""

from llama_index_convrag.testing.openai_server import LocalOpenAIServer, echo_chat
from llama_index_convrag.testing.scripted_llm import LLMCall, ScriptedFailure, ScriptedLLM, split_deltas

__all__ = ["LLMCall", "LocalOpenAIServer", "ScriptedFailure", "ScriptedLLM", "echo_chat", "split_deltas"]
