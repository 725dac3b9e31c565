"""Kwarg splitting of build_chat_engine (pure). The end-to-end as_chat_engine test lands when the retriever and
synthesizer modules are merged."""

import pytest

from llama_index_convrag.chat.factory import ENGINE_KWARGS, SYNTH_KWARGS, split_chat_kwargs

RETRIEVER = frozenset({"similarity_top_k", "search_type", "ranker_type"})


def test_splits_by_owner() -> None:
    pp = object()
    retr, synth, engine, own = split_chat_kwargs(
        {"similarity_top_k": 5, "search_type": "hybrid", "response_mode": "compact", "node_postprocessors": [pp],
         "rephrase_question": False, "streaming": True, "llm": None}, RETRIEVER)
    assert retr == {"similarity_top_k": 5, "search_type": "hybrid"}
    assert synth == {"response_mode": "compact"}
    assert engine == {"node_postprocessors": [pp], "rephrase_question": False}
    assert own == {"streaming": True, "llm": None}


def test_unknown_kwargs_named_with_accepted() -> None:
    with pytest.raises(TypeError, match=r"unknown kwargs \['simlarity_top_k', 'zzz'\]; accepted: \[.*'similarity_top_k'"):
        split_chat_kwargs({"simlarity_top_k": 5, "zzz": 1}, RETRIEVER)


def test_streaming_must_be_bool() -> None:
    with pytest.raises(TypeError, match=r"streaming must be a bool, got 'yes'"):
        split_chat_kwargs({"streaming": "yes"}, RETRIEVER)


def test_name_sets_disjoint() -> None:
    assert not (SYNTH_KWARGS & ENGINE_KWARGS)
