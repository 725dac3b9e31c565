"""The conversational RAG chat engine and its pure parts (rewrite, triggers, budget, records)."""

from llama_index_convrag.chat.budget import BudgetExceededError, TrimReport, message_fit_in
from llama_index_convrag.chat.engine import ConvRAGChatEngine
from llama_index_convrag.chat.records import TurnRecord
from llama_index_convrag.chat.rewrite import QuestionRewriter, RewriteResult
from llama_index_convrag.chat.streaming import ConvRAGStreamingResponse
from llama_index_convrag.chat.triggers import TriggerDecision, needs_rewrite

__all__ = [
    "BudgetExceededError", "ConvRAGChatEngine", "ConvRAGStreamingResponse", "QuestionRewriter", "RewriteResult",
    "TriggerDecision", "TrimReport", "TurnRecord", "message_fit_in", "needs_rewrite",
]
