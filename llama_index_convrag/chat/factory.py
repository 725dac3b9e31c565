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

from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.chat_engine.types import BaseChatEngine

from llama_index_convrag.config.llm import configured_llm, resolve_llm
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.chat.defaults import CHAT_MODES
from llama_index_convrag.chat.engine import ENGINE_OPTIONS, SYNTH_KWARGS, ConvRAGChatEngine, from_defaults_names
from llama_index_convrag.judge.options import refuse_old_keywords
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from llama_index_convrag.synthesizers.registry import lookup_mode

OWN_KWARGS: FrozenSet[str] = frozenset({"llm", "streaming", "chat_mode"})
"""Taken here: ``llm`` (else ``Settings.llm`` if assigned, else from the environment), ``streaming``, ``chat_mode``."""
ENGINE_KWARGS: FrozenSet[str] = (ENGINE_OPTIONS | SYNTH_KWARGS | from_defaults_names()) - OWN_KWARGS - frozenset(
    {"cls", "retriever", "query_engine", "embed_model"})
"""What goes to ``from_defaults`` (the retriever and the embedding model come from the index)."""


INDEX_CHAT_MODES: Tuple[str, ...] = (*CHAT_MODES, "best", "simple")
"""``as_chat_engine``'s modes: ours, plus core's ``best`` (as core: ``condense_plus_context``) and ``simple``."""
SIMPLE_KWARGS: FrozenSet[str] = frozenset({"llm", "system_prompt", "chat_history", "memory", "prefix_messages"})
"""``chat_mode="simple"``: core's ``SimpleChatEngine.from_defaults`` arguments (no retrieval, nothing else applies)."""


def index_chat_mode(chat_mode: Any) -> str:
    """The mode ``as_chat_engine`` builds for ``chat_mode`` (``None``: ``condense_question``; ``best`` is core's
    alias of ``condense_plus_context``); raises naming the accepted modes (pure)."""
    mode = getattr(chat_mode, "value", chat_mode)
    if mode is None:
        return "condense_question"
    if mode not in INDEX_CHAT_MODES:
        raise ConfigurationError(f"chat_mode must be one of {list(INDEX_CHAT_MODES)} (or None: condense_question), "
                                 f"got {mode!r}")
    return "condense_plus_context" if mode == "best" else mode


def build_simple_chat_engine(**kwargs: Any) -> SimpleChatEngine:
    """``chat_mode="simple"``: core's ``SimpleChatEngine`` (the LLM alone, no retrieval), as core's index builds it."""
    unknown = sorted(set(kwargs) - SIMPLE_KWARGS)
    if unknown:
        raise ArgumentTypeError(f"chat_mode='simple' got unknown kwargs {unknown}; accepted: {sorted(SIMPLE_KWARGS)}")
    llm = resolve_llm(configured_llm(kwargs.pop("llm", None)))
    if llm is None:
        raise ConfigurationError("chat_mode='simple' needs an LLM: pass llm=..., or set OPENAI_API_KEY / "
                                 "OPENAI_BASE_URL")
    return SimpleChatEngine.from_defaults(llm=llm, **kwargs)


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


def build_chat_engine(index: Any, **kwargs: Any) -> BaseChatEngine:
    """Our chat engine over ``index`` (a ``ConvRAGIndex``) with hybrid retrieval and our synthesizers (citing);
    ``chat_mode="simple"``: core's ``SimpleChatEngine``."""
    refuse_old_keywords(kwargs)
    chat_mode = index_chat_mode(kwargs.pop("chat_mode", None))
    if chat_mode == "simple":
        return build_simple_chat_engine(**kwargs)
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
    # without an LLM the index's embedding model scores sentences, for the modes that use one (extractive)
    uses_embed_model = llm is None and lookup_mode(mode if mode is not None else "extractive").uses_embed_model
    return ConvRAGChatEngine.from_defaults(
        index.as_retriever(**retriever_kw), llm, embed_model=index.embed_model if uses_embed_model else None,
        chat_mode=chat_mode, **engine_kw)
