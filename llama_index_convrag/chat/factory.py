"""``build_chat_engine(index, **kwargs)``: the engine behind ``ConvRAGIndex.as_chat_engine``.

One kwargs namespace: retriever kwargs (``MilvusHybridRetriever.KWARGS``: ``similarity_top_k``, ``search_type``,
``ranker_type``, ...) go to ``index.as_retriever``; the rest to :meth:`ConvRAGChatEngine.from_defaults` (its own
keywords, ``__init__``'s options and ``get_response_synthesizer``'s arguments, all read from their signatures).
Anything else is rejected, naming it and the accepted names. ``streaming`` is accepted for LlamaIndex compatibility:
the engine streams whenever ``stream_chat``/``astream_chat`` is called, so it only needs to be a bool.

The LLM: the one passed, else the one assigned to ``Settings.llm`` (``synthesizers/resolve.py``), else one configured by
the environment (``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``). ``llm=None`` means no LLM: retrieval-only turns with
extractive answers (or another response mode that needs none). Without ``llm=`` and no LLM found, only such a
response mode builds an engine.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Tuple

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.chat.engine import ENGINE_OPTIONS, SYNTH_KWARGS, ConvRAGChatEngine, from_defaults_names
from llama_index_convrag.config import resolve_llm
from llama_index_convrag.judge.options import refuse_old_keywords
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from llama_index_convrag.synthesizers.registry import lookup_mode
from llama_index_convrag.synthesizers.resolve import configured_llm

OWN_KWARGS: FrozenSet[str] = frozenset({"llm", "streaming", "chat_mode"})
"""Taken here: ``llm`` (else ``Settings.llm`` if assigned, else from the environment), ``streaming``, ``chat_mode``."""
ENGINE_KWARGS: FrozenSet[str] = (ENGINE_OPTIONS | SYNTH_KWARGS | from_defaults_names()) - OWN_KWARGS - frozenset(
    {"cls", "retriever", "query_engine", "embed_model"})
"""What goes to ``from_defaults`` (the retriever and the embedding model come from the index)."""


def split_chat_kwargs(
    kwargs: Dict[str, Any], retriever_kwargs: FrozenSet[str]
) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    """``(retriever, engine, own)`` kwargs; raises TypeError naming unknown ones (pure)."""
    accepted = retriever_kwargs | ENGINE_KWARGS | OWN_KWARGS
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise ArgumentTypeError(f"as_chat_engine got unknown kwargs {unknown}; accepted: {sorted(accepted)}")
    pick = lambda names: {k: v for k, v in kwargs.items() if k in names}  # noqa: E731
    own = pick(OWN_KWARGS)
    if "streaming" in own and not isinstance(own["streaming"], bool):
        raise ArgumentTypeError(f"streaming must be a bool, got {own['streaming']!r}")
    return pick(retriever_kwargs), pick(ENGINE_KWARGS - retriever_kwargs), own


def build_chat_engine(index: Any, **kwargs: Any) -> ConvRAGChatEngine:
    """Our chat engine over ``index`` (a ``ConvRAGIndex``) with hybrid retrieval and our synthesizers (citing)."""
    refuse_old_keywords(kwargs)
    retriever_kw, engine_kw, own = split_chat_kwargs(kwargs, frozenset(MilvusHybridRetriever.KWARGS))
    no_llm = "llm" in own and own["llm"] is None  # llm=None said: no LLM, not "find one"
    llm = None if no_llm else resolve_llm(configured_llm(own.get("llm")))
    mode = engine_kw.get("response_mode")
    if llm is None and (lookup_mode(mode).requires_llm if mode is not None else not no_llm):
        raise ConfigurationError(
            "as_chat_engine needs an LLM: pass llm=..., or set OPENAI_API_KEY / OPENAI_BASE_URL; for retrieval-only "
            f"turns pass llm=None (extractive answers) or a response_mode that needs none (response_mode="
            f"{'extractive'!r}); got response_mode={mode!r}")
    if no_llm:
        engine_kw.setdefault("response_mode", "extractive")
    engine_kw.setdefault("citations", True)
    chat_mode = own.get("chat_mode")
    # without an LLM the index's embedding model scores sentences, for the modes that use one (extractive)
    uses_embed_model = llm is None and lookup_mode(mode if mode is not None else "extractive").uses_embed_model
    return ConvRAGChatEngine.from_defaults(
        index.as_retriever(**retriever_kw), llm, embed_model=index.embed_model if uses_embed_model else None,
        chat_mode=chat_mode if chat_mode is not None else "condense_question", **engine_kw)
