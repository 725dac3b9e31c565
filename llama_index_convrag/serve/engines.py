"""One engine per request over parts built once: the retriever, synthesizers, rewriter, LLM and embed model."""

from __future__ import annotations

import copy
from typing import Any

from llama_index_convrag.chat import ConvRAGChatEngine
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.state import EngineFor


def shared_engine_for(template: ConvRAGChatEngine) -> EngineFor:
    """``engine_for(conversation_id, store)``: a light engine for one conversation sharing ``template``'s parts."""
    if not isinstance(template, ConvRAGChatEngine):
        raise ConfigurationError(f"template must be a ConvRAGChatEngine, got {type(template).__name__}")

    def engine_for(conversation_id: str, store: Any) -> ConvRAGChatEngine:
        for_conversation = getattr(template, "for_conversation", None)
        if for_conversation is not None:  # the engine's own (shares every built part)
            return for_conversation(conversation_id, store=store)
        twin = copy.copy(template)
        twin.conversation_id = conversation_id
        twin._store = store
        return twin

    return engine_for
