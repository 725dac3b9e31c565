"""One engine per request over parts built once: the retriever, synthesizers, rewriter, LLM and embed model."""

from __future__ import annotations

from typing import Any

from llama_index_convrag.chat import ConvRAGChatEngine
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.state import EngineFor


def shared_engine_for(template: ConvRAGChatEngine) -> EngineFor:
    """``engine_for(conversation_id, port)``: a light engine for one conversation sharing ``template``'s parts, whose
    turns go through ``port`` (the served turn's :class:`~.turn_store.ServedTurn`)."""
    if not isinstance(template, ConvRAGChatEngine):
        raise ConfigurationError(f"template must be a ConvRAGChatEngine, got {type(template).__name__}")

    def engine_for(conversation_id: str, port: Any) -> ConvRAGChatEngine:
        return template.for_conversation(conversation_id, port=port)

    return engine_for
