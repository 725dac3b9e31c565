"""build_chat_engine: kwarg splitting (pure) and as_chat_engine end to end."""

import inspect

import pytest

from llama_index_convrag.chat.engine import ENGINE_OPTIONS, SYNTH_KWARGS, ConvRAGChatEngine
from llama_index_convrag.chat.factory import ENGINE_KWARGS, OWN_KWARGS, split_chat_kwargs
from llama_index_convrag.synthesizers import get_response_synthesizer

RETRIEVER = frozenset({"similarity_top_k", "search_type", "ranker_type"})


def test_splits_by_owner() -> None:
    pp = object()
    retr, engine, own = split_chat_kwargs(
        {"similarity_top_k": 5, "search_type": "hybrid", "response_mode": "compact", "node_postprocessors": [pp],
         "rephrase_question": False, "streaming": True, "llm": None, "chat_mode": "context"}, RETRIEVER)
    assert retr == {"similarity_top_k": 5, "search_type": "hybrid"}
    assert engine == {"response_mode": "compact", "node_postprocessors": [pp], "rephrase_question": False}
    assert own == {"streaming": True, "llm": None, "chat_mode": "context"}


def test_unknown_kwargs_named_with_accepted() -> None:
    with pytest.raises(TypeError, match=r"unknown kwargs \['simlarity_top_k', 'zzz'\]; accepted: \[.*'similarity_top_k'"):
        split_chat_kwargs({"simlarity_top_k": 5, "zzz": 1}, RETRIEVER)


def test_streaming_must_be_bool() -> None:
    with pytest.raises(TypeError, match=r"streaming must be a bool, got 'yes'"):
        split_chat_kwargs({"streaming": "yes"}, RETRIEVER)


def test_accepted_names_come_from_the_signatures() -> None:
    """No hand-kept lists: every synthesizer argument (tokenizer, output_cls, verbose...) and engine option."""
    synth = set(inspect.signature(get_response_synthesizer).parameters) - {"llm", "streaming", "callback_manager"}
    assert SYNTH_KWARGS == synth and {"tokenizer", "output_cls", "verbose"} <= SYNTH_KWARGS
    init = set(inspect.signature(ConvRAGChatEngine.__init__).parameters)
    assert ENGINE_OPTIONS < init and {"rephrase_question", "budget_ratio", "reserved_output_tokens"} <= ENGINE_OPTIONS
    assert not ENGINE_OPTIONS & {"retriever", "llm", "store", "rewriter", "synthesizer"}
    named = set(inspect.signature(ConvRAGChatEngine.from_defaults).parameters) - {"kwargs", "retriever",
                                                                                 "query_engine", "embed_model"}
    assert ENGINE_KWARGS == (SYNTH_KWARGS | ENGINE_OPTIONS | named) - OWN_KWARGS - {"embed_model"}  # the index's
    assert not ENGINE_KWARGS & OWN_KWARGS


def test_as_chat_engine_end_to_end(milvus_client, collection_name, embed_model, tmp_path) -> None:  # type: ignore
    """Runs once the retriever (ConvRAGIndex) and synthesizer modules are merged; skipped before."""
    indices = pytest.importorskip("llama_index_convrag.indices")
    pytest.importorskip("llama_index_convrag.synthesizers")
    from llama_index.core import Document

    from llama_index_convrag.chat import ConvRAGChatEngine
    from llama_index_convrag.storage.conversation import SQLiteConversationStore
    from llama_index_convrag.testing import ScriptedLLM
    from tests.chat.conftest import DOCS

    index = indices.ConvRAGIndex.from_documents([Document(text=t, id_=k) for k, t in DOCS],
                                                collection_name=collection_name, embed_model=embed_model,
                                                client=milvus_client)
    llm = ScriptedLLM.fixed("Inception was released in 2010 [1].")
    store = SQLiteConversationStore(tmp_path / "c.db")
    engine = index.as_chat_engine(chat_mode="condense_question", llm=llm, similarity_top_k=2,
                                  conversation_store=store, return_generated_question=True)
    assert isinstance(engine, ConvRAGChatEngine)
    resp = engine.chat("When was Inception released?")
    assert resp.response == "Inception was released in 2010 [1]."
    assert resp.metadata["generated_question"] == "When was Inception released?"
    [cite] = store.get_citations(resp.metadata["message_id"])
    assert (cite.marker, cite.source_index) == (1, 0)
    assert cite.node_id == resp.source_nodes[0].node.node_id
    streamed = engine.stream_chat("In which year did the film Inception come out?")
    assert "".join(streamed.response_gen) == "Inception was released in 2010 [1]."
    assert [c.marker for c in store.get_citations(streamed.message_id)] == [1]  # filled when the stream ended
    with pytest.raises(TypeError, match=r"unknown kwargs \['bogus'\]"):
        index.as_chat_engine(llm=llm, bogus=1)


@pytest.mark.parametrize("mode, answer", [("no_text", "None"), ("context_only", "Inception")])
def test_no_llm_modes_without_an_embedding_model_build(milvus_client, collection_name, embed_model, mode, answer):
    """Every response mode that needs no LLM builds without one (the index's embedding model goes only to the
    modes that use it: extractive); issue 14, ``convrag ask --response-mode no_text``."""
    from llama_index.core import Document

    from llama_index_convrag.indices import ConvRAGIndex
    from tests.chat.conftest import DOCS

    index = ConvRAGIndex.from_documents([Document(text=t, id_=k) for k, t in DOCS], collection_name=collection_name,
                                        embed_model=embed_model, client=milvus_client)
    engine = index.as_chat_engine(llm=None, response_mode=mode, similarity_top_k=1)
    response = engine.chat("When was Inception released?")
    assert answer in response.response  # no_text: "None", as core's engines (str() of an empty Response)
    assert len(response.source_nodes) == 1
