"""build_chat_engine: the index's names (pure checks) and as_chat_engine end to end."""

import pytest

from llama_index_convrag.chat.factory import index_chat_mode, retriever_moves


def test_retriever_parameters_are_pointed_to_retriever_kwargs() -> None:
    assert retriever_moves(["similarity_top_k", "bogus"]) == {
        "similarity_top_k": "retriever_kwargs={'similarity_top_k': ...}"}


def test_chat_modes() -> None:
    assert (index_chat_mode(None), index_chat_mode("best"), index_chat_mode("simple")) == (
        "condense_question", "condense_plus_context", "simple")
    with pytest.raises(ValueError, match=r"chat_mode must be one of \['condense_question', 'condense_plus_context', "
                                         r"'context', 'best', 'simple'\] \(or None: condense_question\), got 'react'"):
        index_chat_mode("react")


def test_as_chat_engine_end_to_end(milvus_client, collection_name, embed_model, tmp_path) -> None:  # type: ignore
    """Runs once the retriever (ConvRAGIndex) and synthesizer modules are merged; skipped before."""
    indices = pytest.importorskip("llama_index_convrag.indices")
    pytest.importorskip("llama_index_convrag.synthesizers")
    from llama_index.core import Document

    from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine
    from llama_index_convrag.storage.conversation import SQLiteConversationStore
    from llama_index_convrag.testing import ScriptedLLM
    from tests.chat.conftest import DOCS

    index = indices.ConvRAGIndex.from_documents([Document(text=t, id_=k) for k, t in DOCS],
                                                collection_name=collection_name, embed_model=embed_model,
                                                client=milvus_client)
    llm = ScriptedLLM.fixed("Inception was released in 2010 [1].")
    store = SQLiteConversationStore(tmp_path / "c.db")
    engine = index.as_chat_engine(chat_mode="condense_question", llm=llm, retriever_kwargs={"similarity_top_k": 2},
                                  conversation_store=store,
                                  answer=AnswerOptions(return_generated_question=True, citation_mode="inline"))
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
    with pytest.raises(TypeError, match=r"as_chat_engine does not take \['bogus'\] \(bogus: unknown\); accepted: "
                                        r"\['chat_mode', 'llm', 'retriever_kwargs'"):
        index.as_chat_engine(llm=llm, bogus=1)
    with pytest.raises(TypeError, match=r"similarity_top_k: now retriever_kwargs=\{'similarity_top_k': ...\}"):
        index.as_chat_engine(llm=llm, similarity_top_k=2)
    with pytest.raises(TypeError, match=r"streaming: now nothing: stream_chat\(\) / astream_chat\(\) stream"):
        index.as_chat_engine(llm=llm, streaming=True)


@pytest.mark.parametrize("mode, answer", [("no_text", "None"), ("context_only", "Inception")])
def test_no_llm_modes_without_an_embedding_model_build(milvus_client, collection_name, embed_model, mode, answer):
    """Every response mode that needs no LLM builds without one (the index's embedding model goes only to the
    modes that use it: extractive); issue 14, ``convrag ask --response-mode no_text``."""
    from llama_index.core import Document

    from llama_index_convrag.indices import ConvRAGIndex
    from tests.chat.conftest import DOCS

    index = ConvRAGIndex.from_documents([Document(text=t, id_=k) for k, t in DOCS], collection_name=collection_name,
                                        embed_model=embed_model, client=milvus_client)
    from llama_index_convrag.chat import AnswerOptions

    engine = index.as_chat_engine(llm=None, answer=AnswerOptions(response_mode=mode),
                                  retriever_kwargs={"similarity_top_k": 1})
    response = engine.chat("When was Inception released?")
    assert answer in response.response  # no_text: "None", as core's engines (str() of an empty Response)
    assert len(response.source_nodes) == 1
