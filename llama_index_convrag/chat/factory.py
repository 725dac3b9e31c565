"""``build_chat_engine(index, ...)``: the engine behind ``ConvRAGIndex.as_chat_engine``.

It takes the engine's own names (:data:`~.options.AS_CHAT_ENGINE_NAMES`: ``from_defaults``'s, less the parts the index
builds) and the retriever's parameters as one mapping, ``retriever_kwargs`` (the arguments of ``index.as_retriever``:
``similarity_top_k``, ``search_type``, ``ranker_type``, ...), so the two are never mixed. A retriever parameter given
on its own, or any name the engine took before, is refused with its place now.

The LLM: the one passed, else the one assigned to ``Settings.llm`` (``synthesizers/resolve.py``), else one configured by
the environment (``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``). ``llm=None`` means no LLM: retrieval-only turns with
extractive answers (or another response mode that needs none). Without ``llm=`` and no LLM found, only such a
response mode builds an engine.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, Mapping, Optional, Tuple

from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.chat_engine.types import BaseChatEngine

from llama_index_convrag.config.llm import configured_llm, resolve_llm
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.chat.defaults import CHAT_MODES, NO_LLM_RESPONSE_MODE
from llama_index_convrag.chat.engine import ConvRAGChatEngine
from llama_index_convrag.chat.options import AS_CHAT_ENGINE_NAMES, AnswerOptions, options_of, refuse_names
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from llama_index_convrag.synthesizers.registry import lookup_mode

INDEX_CHAT_MODES: Tuple[str, ...] = (*CHAT_MODES, "best", "simple")
"""``as_chat_engine``'s modes: ours, plus core's ``best`` (as core: ``condense_plus_context``) and ``simple``."""
SIMPLE_NAMES = ("llm", "system_prompt", "chat_history", "memory")
"""``chat_mode="simple"``: core's ``SimpleChatEngine.from_defaults`` arguments (no retrieval, nothing else applies)."""
UNSET: Any = object()
"""``llm`` not given (find one) as opposed to ``llm=None`` (no LLM)."""


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


def retriever_moves(names: Any) -> Dict[str, str]:
    """Where each retriever parameter in ``names`` goes instead (``retriever_kwargs``)."""
    return {k: f"retriever_kwargs={{{k!r}: ...}}" for k in names if k in MilvusHybridRetriever.KWARGS}


def build_simple_chat_engine(llm: Any, given: Dict[str, Any]) -> SimpleChatEngine:
    """``chat_mode="simple"``: core's ``SimpleChatEngine`` (the LLM alone, no retrieval), as core's index builds it."""
    others = sorted(k for k, v in given.items() if v is not None and k not in SIMPLE_NAMES)
    if others:
        raise ArgumentTypeError(f"chat_mode='simple' (core's SimpleChatEngine: the LLM alone) does not take {others}; "
                                f"accepted: {list(SIMPLE_NAMES)}")
    llm = resolve_llm(configured_llm(None if llm is UNSET else llm))
    if llm is None:
        raise ConfigurationError("chat_mode='simple' needs an LLM: pass llm=..., or set OPENAI_API_KEY / "
                                 "OPENAI_BASE_URL")
    kw = {k: v for k, v in given.items() if k in SIMPLE_NAMES and v is not None}
    return SimpleChatEngine.from_defaults(llm=llm, **kw)


def build_chat_engine(index: Any, chat_mode: Any = None, llm: Any = UNSET, *,
                      retriever_kwargs: Optional[Mapping[str, Any]] = None, **engine: Any) -> BaseChatEngine:
    """Our chat engine over ``index`` (a ``ConvRAGIndex``) with hybrid retrieval and our synthesizers (citing);
    ``chat_mode="simple"``: core's ``SimpleChatEngine``. ``engine``: the names of
    :data:`~.options.AS_CHAT_ENGINE_NAMES` (checked here)."""
    unknown = {k: v for k, v in engine.items() if k not in AS_CHAT_ENGINE_NAMES}
    refuse_names(unknown, "as_chat_engine", AS_CHAT_ENGINE_NAMES, retriever_moves(unknown))
    mode = index_chat_mode(chat_mode)
    if mode == "simple":
        return build_simple_chat_engine(llm, {**engine, "retriever_kwargs": retriever_kwargs})
    if retriever_kwargs is not None and not isinstance(retriever_kwargs, Mapping):
        raise ArgumentTypeError(f"retriever_kwargs must be a mapping of as_retriever's arguments, got "
                                f"{retriever_kwargs!r}")
    answer = options_of(AnswerOptions, engine.pop("answer", None), "answer")
    no_llm = llm is None  # llm=None said: no LLM, not "find one"
    resolved = None if no_llm else resolve_llm(configured_llm(None if llm is UNSET else llm))
    response_mode = answer.response_mode
    if resolved is None and (lookup_mode(response_mode).requires_llm if response_mode is not None else not no_llm):
        raise ConfigurationError(
            "as_chat_engine needs an LLM: pass llm=..., or set OPENAI_API_KEY / OPENAI_BASE_URL; for retrieval-only "
            f"turns pass llm=None (extractive answers) or AnswerOptions(response_mode=...) of a mode that needs none "
            f"({NO_LLM_RESPONSE_MODE!r}); got response_mode={response_mode!r}")
    if resolved is None and answer.embed_model is None and \
            lookup_mode(response_mode if response_mode is not None else NO_LLM_RESPONSE_MODE).uses_embed_model:
        answer = replace(answer, embed_model=index.embed_model)  # without an LLM the index's model scores sentences
    retriever = index.as_retriever(**dict(retriever_kwargs if retriever_kwargs is not None else {}))
    return ConvRAGChatEngine.from_defaults(retriever, resolved, chat_mode=mode, answer=answer, **engine)
