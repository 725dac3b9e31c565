"""Test doubles shared by every test module (they live in the package so notebooks and benches can use them)."""

from llama_index_convrag.testing.openai_server import LocalOpenAIServer
from llama_index_convrag.testing.scripted_llm import LLMCall, ScriptedFailure, ScriptedLLM, split_deltas

__all__ = ["LLMCall", "LocalOpenAIServer", "ScriptedFailure", "ScriptedLLM", "split_deltas"]
