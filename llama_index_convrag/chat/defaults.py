"""The rules ``ConvRAGChatEngine.from_defaults`` applies to the arguments users pass to LlamaIndex core's chat engines
(pure functions; the engine module derives its accepted names from signatures)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import BaseMemory
from llama_index.core.response_synthesizers import BaseSynthesizer

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.conversational.rewrite import STRATEGIES, QuestionRewriter
from llama_index_convrag.conversational.retriever import ConversationalRetriever
from llama_index_convrag.synthesizers import get_response_synthesizer

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


def alias(name: str, value: Any, canonical: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """``{canonical: value}`` for an alias that was given; TypeError when both names disagree."""
    if value is None:
        return {}
    if canonical in options and options[canonical] != value:
        raise ArgumentTypeError(f"{name}={value!r} contradicts {canonical}={options[canonical]!r}; pass one of them")
    return {canonical: value}


def pick_one(name: str, value: Any, other: str, other_value: Any) -> Any:
    if value is not None and other_value is not None:
        raise ArgumentTypeError(f"pass {name}= or {other}= (the same prompt), not both")
    return value if value is not None else other_value


def seed_messages(chat_history: Optional[List[ChatMessage]], memory: Optional[BaseMemory]) -> List[ChatMessage]:
    """The messages that seed a new conversation: ``chat_history``, or everything a core ``memory`` holds."""
    if chat_history is not None and memory is not None:
        raise ArgumentTypeError("pass chat_history= or memory= (both seed the conversation), not both")
    if memory is not None:
        return list(memory.get_all())
    return list(chat_history) if chat_history is not None else []


def rewrite_strategy_for(strategy: Optional[str], skip_condense: bool, condense_llm: Optional[LLM]) -> str:
    """The rewrite strategy: as given; ``none`` for ``skip_condense``; ``auto`` / ``None``: ``llm`` with an LLM,
    else :data:`NO_LLM_REWRITE_STRATEGY`. ValueError naming the accepted ones for anything else."""
    if strategy is not None and strategy not in REWRITE_STRATEGIES:
        raise ConfigurationError(f"rewrite_strategy must be one of {list(REWRITE_STRATEGIES)}, got {strategy!r}")
    if skip_condense:
        if strategy not in (None, AUTO_REWRITE_STRATEGY, "none"):
            raise ConfigurationError(f"skip_condense=True means rewrite_strategy 'none', got rewrite_strategy={strategy!r}")
        return "none"
    if strategy not in (None, AUTO_REWRITE_STRATEGY):
        return strategy
    return "llm" if condense_llm is not None else NO_LLM_REWRITE_STRATEGY


def fusing_retriever(retriever: Optional[BaseRetriever], rewriter: QuestionRewriter,
                     fuse: bool) -> Optional[BaseRetriever]:
    """``retriever`` wrapped in a :class:`ConversationalRetriever` when the ``contextual`` rewrite is fused (the
    follow-up's own list and the expanded query's); as given otherwise (other strategies, a query engine)."""
    if retriever is None or not fuse or rewriter.strategy != "contextual":
        return retriever
    return ConversationalRetriever.deepened(retriever)


def default_synthesizers(llm: Optional[LLM], embed_model: Optional[BaseEmbedding], synth_kw: Dict[str, Any],
                         streaming: Optional[BaseSynthesizer]) -> Tuple[BaseSynthesizer, BaseSynthesizer]:
    """Our synthesizers (plain, streaming) for ``synth_kw``; ``llm=None``: :data:`NO_LLM_RESPONSE_MODE`."""
    kw = dict(synth_kw)
    if llm is None:
        kw.setdefault("response_mode", NO_LLM_RESPONSE_MODE)
    if embed_model is not None:
        kw["embed_model"] = embed_model
    plain = get_response_synthesizer(llm=llm, streaming=False, **kw)
    return plain, streaming if streaming is not None else get_response_synthesizer(llm=llm, streaming=True, **kw)
