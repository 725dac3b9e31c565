"""The conversational wing between retrieval and chat: when a follow-up needs its history (``triggers``), the
retrieval-only rewrite (``rewrite``: the LLM condense step, its output cleaning in ``rewrite_output``, and the no-LLM
``contextualize``), the query type that carries a rewrite's plan along the call (``query``), and the retriever that
fuses a follow-up's own results with its contextualised query's (``retriever``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "ContextRules": "contextualize",
    "Contextualized": "contextualize",
    "ConversationalQuery": "query",
    "ConversationalRetriever": "retriever",
    "QuestionRewriter": "rewrite",
    "RewriteResult": "rewrite",
    "TriggerDecision": "triggers",
    "contextualize": "contextualize",
    "needs_rewrite": "triggers",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.conversational.contextualize import ContextRules, Contextualized, contextualize
    from llama_index_convrag.conversational.query import ConversationalQuery
    from llama_index_convrag.conversational.retriever import ConversationalRetriever
    from llama_index_convrag.conversational.rewrite import QuestionRewriter, RewriteResult
    from llama_index_convrag.conversational.triggers import TriggerDecision, needs_rewrite
