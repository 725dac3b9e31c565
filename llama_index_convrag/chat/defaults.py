"""The rules ``ConvRAGChatEngine.from_defaults`` applies to its arguments (pure functions; the accepted names are
written down in ``chat/options.py``)."""

from __future__ import annotations

import copy
from typing import Any, Dict, Optional, Tuple

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms.llm import LLM
from llama_index.core.response_synthesizers import BaseSynthesizer
from llama_index.core.response_synthesizers.base import BaseSynthesizer as CoreBaseSynthesizer

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.conversational.rewrite import STRATEGIES, QuestionRewriter
from llama_index_convrag.conversational.retriever import ConversationalRetriever
from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.synthesizers.grounding import SupportScorer

CHAT_MODES = ("condense_question", "condense_plus_context", "context")
"""The chat modes this engine serves (``as_chat_engine(chat_mode=...)`` accepts these and ``None``)."""
NO_LLM_RESPONSE_MODE = "extractive"
"""The response mode of ``llm=None`` turns: extractive answers (the retrieved sentences closest to the question)."""
NO_LLM_REWRITE_STRATEGY = "contextual"
"""The rewrite strategy of ``llm=None`` turns: salient, recent history terms, needs no LLM
(:mod:`~llama_index_convrag.conversational.contextualize`); the engine fuses its results with the question's own
(:class:`~llama_index_convrag.conversational.retriever.ConversationalRetriever`)."""
AUTO_REWRITE_STRATEGY = "auto"
"""``rewrite_strategy="auto"`` (and ``None``): ``llm`` when a (condense) LLM is configured, else
:data:`NO_LLM_REWRITE_STRATEGY`."""
REWRITE_STRATEGIES = (AUTO_REWRITE_STRATEGY, *STRATEGIES)
"""Every ``rewrite_strategy`` the engine accepts."""
ENGINE_CITATION_MODE = "aligned"
"""The ``citation_mode`` of the synthesizers the engine builds when none is given: the LLM answers with the plain
prompt and the answer's sentences are cited with their passages after it (``docs/results/answers.md``: a small
model given the citation instruction answers with markers only). ``get_response_synthesizer`` keeps ``inline``."""


def check_parts(retriever: Any, synthesizer: Any, query_engine: Any, context_chat: Any) -> None:
    if (retriever is None) == (query_engine is None):
        raise ConfigurationError("pass exactly one of retriever= (we retrieve and synthesize) or query_engine= (it answers "
                         f"the retrieval query); got retriever={retriever!r}, query_engine={query_engine!r}")
    if retriever is not None and synthesizer is None and context_chat is None:
        raise ConfigurationError("a retriever needs synthesizer= (or context_chat=) to answer")
    if context_chat is not None and (synthesizer is not None or query_engine is not None):
        raise ConfigurationError("chat modes 'condense_plus_context' and 'context' answer with the retriever's context and "
                         "their prompts: pass a retriever without synthesizer= or query_engine=")


def check_chat_mode(chat_mode: Any, system_prompt: Any, context_prompt: Any, context_refine_prompt: Any,
                    llm: Optional[LLM], prefix_messages: Any = None) -> str:
    """The chat mode's name; the prompts given must be ones that mode (with or without an LLM) uses."""
    mode = getattr(chat_mode, "value", chat_mode)
    if mode not in CHAT_MODES:
        raise ConfigurationError(f"chat_mode must be one of {list(CHAT_MODES)}, got {mode!r}")
    given = [n for n, v in [("system_prompt", system_prompt), ("context_prompt", context_prompt),
                            ("context_refine_prompt", context_refine_prompt),
                            ("prefix_messages", prefix_messages)] if v is not None]
    if mode == "condense_question" and given:
        raise ConfigurationError(f"{given} shape the answers of chat_mode 'condense_plus_context' or 'context'; "
                         "'condense_question' answers with the synthesizer's templates (text_qa_template=...)")
    if llm is None and given:
        raise ConfigurationError(f"{given} are prompts for an LLM; with llm=None the answers are extractive (no prompt)")
    return mode


def rewrite_strategy_for(strategy: str, no_rewrite: bool, condense_llm: Optional[LLM]) -> str:
    """The rewrite strategy: ``none`` for a mode that never rewrites (``no_rewrite``: chat mode ``context``; another
    strategy given there is refused); ``auto``: ``llm`` with a (condense) LLM, else :data:`NO_LLM_REWRITE_STRATEGY`;
    any other as given."""
    if strategy not in REWRITE_STRATEGIES:
        raise ConfigurationError(f"rewrite strategy must be one of {list(REWRITE_STRATEGIES)}, got {strategy!r}")
    if no_rewrite:
        if strategy not in (AUTO_REWRITE_STRATEGY, "none"):
            raise ConfigurationError(f"chat_mode 'context' retrieves with the question as written (strategy 'none'), "
                                     f"got RewriteOptions(strategy={strategy!r})")
        return "none"
    if strategy != AUTO_REWRITE_STRATEGY:
        return strategy
    return "llm" if condense_llm is not None else NO_LLM_REWRITE_STRATEGY


def fusing_retriever(retriever: Optional[BaseRetriever], rewriter: QuestionRewriter,
                     fuse: bool) -> Optional[BaseRetriever]:
    """``retriever`` wrapped in a :class:`ConversationalRetriever` when the ``contextual`` rewrite is fused (the
    follow-up's own list and the expanded query's); as given otherwise (other strategies, a query engine)."""
    if retriever is None or not fuse or rewriter.strategy != "contextual":
        return retriever
    return ConversationalRetriever.deepened(retriever)


def synthesizer_kwargs(response_mode: Optional[str], citations: bool, citation_mode: str,
                       embed_model: Optional[BaseEmbedding], llm: Optional[LLM],
                       support_scorer: Optional[SupportScorer] = None) -> Dict[str, Any]:
    """``get_response_synthesizer`` arguments of the synthesizers the engine builds (``llm=None``: the
    :data:`NO_LLM_RESPONSE_MODE` unless a mode is given)."""
    kw: Dict[str, Any] = {"citations": citations, "citation_mode": citation_mode}
    mode = response_mode if response_mode is not None else (NO_LLM_RESPONSE_MODE if llm is None else None)
    if mode is not None:
        kw["response_mode"] = mode
    if embed_model is not None:
        kw["embed_model"] = embed_model
    if support_scorer is not None:
        kw["support_scorer"] = support_scorer
    return kw


def default_synthesizers(llm: Optional[LLM], synth_kw: Dict[str, Any]) -> Tuple[BaseSynthesizer, BaseSynthesizer]:
    """Our synthesizers (plain, streaming) for ``synth_kw`` (:func:`synthesizer_kwargs`)."""
    return (get_response_synthesizer(llm=llm, streaming=False, **synth_kw),
            get_response_synthesizer(llm=llm, streaming=True, **synth_kw))


def streaming_twin(synthesizer: Any) -> Optional[Any]:
    """A copy of ``synthesizer`` (a core-style synthesizer: ours or core's) that streams, sharing every part; the
    synthesizer itself when it streams already; None for anything else (or structured output), which answers
    streamed turns in one piece."""
    if not isinstance(synthesizer, CoreBaseSynthesizer) or getattr(synthesizer, "_output_cls", None) is not None:
        return None
    if getattr(synthesizer, "_streaming", False):
        return synthesizer
    twin = copy.copy(synthesizer)
    twin._streaming = True
    return twin
