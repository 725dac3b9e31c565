"""The conversational RAG chat engine and its pure parts (budget, records, streaming).

Usage::

    from llama_index_convrag.chat import ConvRAGChatEngine
    from llama_index_convrag.storage.conversation import SQLiteConversationStore

    engine = ConvRAGChatEngine.from_defaults(
        retriever, llm, conversation_store=SQLiteConversationStore("chats.db"), conversation_id="user-42",
        rewrite=RewriteOptions(llm=cheap_llm),
        answer=AnswerOptions(return_generated_question=True, no_docs_reply="No idea."),
    )
    response = engine.chat("Who directed Inception?")
    response.metadata["generated_question"], response.metadata["message_id"], response.metadata["trim_report"]
    stream = engine.stream_chat("When was it released?")
    stream.message_id            # the stored placeholder, before the first token
    for delta in stream.response_gen: ...
    engine.store.get_citations(stream.message_id)

Or ``index.as_chat_engine(chat_mode="condense_question", llm=llm, retriever_kwargs={"similarity_top_k": 5}, ...)``
on a ``ConvRAGIndex``. Every turn's storage goes through the engine's port (``chat.port.TurnPort``).

Core's names work too, with core's ``from_defaults`` signatures and defaults (``core_names.py``):
``CondenseQuestionChatEngine``, ``CondensePlusContextChatEngine``, ``ContextChatEngine``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "ConvRAGChatEngine": "engine",
    "CondenseQuestionChatEngine": "core_names",
    "CondensePlusContextChatEngine": "core_names",
    "ContextChatEngine": "core_names",
    "ConvRAGStreamingResponse": "streaming",
    "RewriteOptions": "options",
    "AnswerOptions": "options",
    "BudgetOptions": "options",
    "TurnPort": "port",
    "StoreTurnPort": "port",
    "TurnRequest": "port",
    "TurnContext": "port",
    "TurnOutcome": "port",
    "message_fit_in": "budget",
    "TrimReport": "budget",
    "TurnRecord": "records",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.chat.budget import TrimReport, message_fit_in
    from llama_index_convrag.chat.core_names import (
        CondensePlusContextChatEngine,
        CondenseQuestionChatEngine,
        ContextChatEngine,
    )
    from llama_index_convrag.chat.engine import ConvRAGChatEngine
    from llama_index_convrag.chat.options import AnswerOptions, BudgetOptions, RewriteOptions
    from llama_index_convrag.chat.port import StoreTurnPort, TurnContext, TurnOutcome, TurnPort, TurnRequest
    from llama_index_convrag.chat.records import TurnRecord
    from llama_index_convrag.chat.streaming import ConvRAGStreamingResponse
