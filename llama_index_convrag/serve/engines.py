"""One engine per request over parts built once per knowledge base: the retriever (its collection), synthesizers,
rewriter, LLM and embed model."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

from llama_index_convrag.chat import ConvRAGChatEngine
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.state import EngineFor
from llama_index_convrag.storage.conversation.knowledge import KnowledgeBase


def shared_engine_for(template: ConvRAGChatEngine) -> EngineFor:
    """``engine_for(conversation_id, port, knowledge_base)`` for a server of one knowledge base: a light engine for
    one conversation sharing ``template``'s parts, whatever the knowledge base (give the app only the one), whose
    turns go through ``port`` (the served turn's :class:`~.turn_store.ServedTurn`)."""
    if not isinstance(template, ConvRAGChatEngine):
        raise ConfigurationError(f"template must be a ConvRAGChatEngine, got {type(template).__name__}")

    def engine_for(conversation_id: str, port: Any, knowledge_base: Any = None) -> ConvRAGChatEngine:
        return template.for_conversation(conversation_id, port=port)

    return engine_for


class EnginesPerCollection:
    """``engine_for`` over one template engine per knowledge base collection, built by ``build(collection)`` on the
    base's first turn and kept (the ``max_templates`` most recently used)."""

    def __init__(self, build: Callable[[str], ConvRAGChatEngine], max_templates: int = 32) -> None:
        if max_templates < 1:
            raise ConfigurationError(f"max_templates must be >= 1, got {max_templates!r}")
        self._build, self._max = build, max_templates
        self._templates: "OrderedDict[str, ConvRAGChatEngine]" = OrderedDict()
        self._lock = threading.Lock()

    def template(self, collection: str) -> ConvRAGChatEngine:
        with self._lock:
            found = self._templates.get(collection)
            if found is not None:
                self._templates.move_to_end(collection)
                return found
        built = self._build(collection)
        with self._lock:
            self._templates[collection] = built
            while len(self._templates) > self._max:
                self._templates.popitem(last=False)
        return built

    def has(self, collection: str) -> bool:
        """Whether the template of ``collection`` is built."""
        with self._lock:
            return collection in self._templates

    def forget(self, collection: str) -> None:
        """Drop the template of a collection (its knowledge base was deleted)."""
        with self._lock:
            self._templates.pop(collection, None)

    def __call__(self, conversation_id: str, port: Any, knowledge_base: KnowledgeBase) -> ConvRAGChatEngine:
        return self.template(knowledge_base.collection).for_conversation(conversation_id, port=port)
