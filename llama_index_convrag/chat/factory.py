"""``build_chat_engine(index, **kwargs)``: the engine behind ``ConvRAGIndex.as_chat_engine``.

One kwargs namespace is split by owner: retriever kwargs (``MilvusHybridRetriever.KWARGS``: ``similarity_top_k``,
``search_type``, ``ranker_type``, ...) go to ``index.as_retriever``; ``node_postprocessors`` to the engine; synthesizer
kwargs (:data:`SYNTH_KWARGS`) to ``llama_index_convrag.synthesizers.get_response_synthesizer``; engine kwargs
(:data:`ENGINE_KWARGS`) to :meth:`ConvRAGChatEngine.from_defaults`. Anything else is rejected, naming it and the
accepted names. ``streaming`` is accepted for LlamaIndex compatibility: the engine streams whenever
``stream_chat``/``astream_chat`` is called (it builds both a plain and a streaming synthesizer), so it only needs to
be a bool.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Tuple

from llama_index_convrag.chat.engine import ENGINE_OPTIONS, ConvRAGChatEngine

SYNTH_KWARGS: FrozenSet[str] = frozenset({
    "response_mode", "citations", "text_qa_template", "refine_template", "summary_template", "simple_template",
    "structured_answer_filtering", "empty_response", "early_stop", "use_async",
})
ENGINE_KWARGS: FrozenSet[str] = ENGINE_OPTIONS | frozenset({
    "condense_llm", "conversation_store", "conversation_id", "chat_history", "rewrite_strategy", "rewrite_trigger",
    "last_n_turns", "max_rewrite_history_tokens", "condense_prompt", "get_chat_history", "count_tokens",
    "node_postprocessors",
})
OWN_KWARGS: FrozenSet[str] = frozenset({"llm", "streaming"})


def split_chat_kwargs(
    kwargs: Dict[str, Any], retriever_kwargs: FrozenSet[str]
) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    """``(retriever, synthesizer, engine, own)`` kwargs; raises TypeError naming unknown ones (pure)."""
    accepted = retriever_kwargs | SYNTH_KWARGS | ENGINE_KWARGS | OWN_KWARGS
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise TypeError(f"as_chat_engine got unknown kwargs {unknown}; accepted: {sorted(accepted)}")
    pick = lambda names: {k: v for k, v in kwargs.items() if k in names}  # noqa: E731
    retriever = pick(retriever_kwargs)
    synth = pick(SYNTH_KWARGS - retriever_kwargs)
    engine = pick(ENGINE_KWARGS - retriever_kwargs - SYNTH_KWARGS)
    own = pick(OWN_KWARGS)
    if "streaming" in own and not isinstance(own["streaming"], bool):
        raise TypeError(f"streaming must be a bool, got {own['streaming']!r}")
    return retriever, synth, engine, own


def build_chat_engine(index: Any, **kwargs: Any) -> ConvRAGChatEngine:
    """Our condense-question engine over ``index`` (a ``ConvRAGIndex``) with hybrid retrieval and our synthesizer."""
    from llama_index_convrag.config import resolve_llm
    from llama_index_convrag.retrievers import MilvusHybridRetriever
    from llama_index_convrag.synthesizers import get_response_synthesizer

    retriever_kw, synth_kw, engine_kw, own = split_chat_kwargs(kwargs, frozenset(MilvusHybridRetriever.KWARGS))
    llm = resolve_llm(own.get("llm"))
    if llm is None:
        raise ValueError(
            "as_chat_engine needs an LLM: pass llm=..., or set OPENAI_API_KEY / OPENAI_BASE_URL "
            "(use index.as_retriever() for retrieval without an LLM)"
        )
    synth_kw.setdefault("citations", True)
    synthesizer = get_response_synthesizer(llm=llm, streaming=False, **synth_kw)
    streaming_synthesizer = get_response_synthesizer(llm=llm, streaming=True, **synth_kw)
    retriever = index.as_retriever(**retriever_kw)
    return ConvRAGChatEngine.from_defaults(
        retriever, llm, synthesizer=synthesizer, streaming_synthesizer=streaming_synthesizer, **engine_kw
    )
