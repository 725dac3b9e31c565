from typing import Any

import pytest
from llama_index.core import Settings
from llama_index.core.response_synthesizers import get_response_synthesizer
from llama_index.core.schema import Document

from llama_index_convrag.chat import AnswerOptions, RewriteOptions
from llama_index_convrag.indices import ConvRAGIndex
from llama_index_convrag.milvus.vector_store import ConvRAGMilvusStore
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from llama_index_convrag.testing import ScriptedLLM

DOCS = [Document(text="Cats purr and hunt mice at night.", id_="cats", metadata={"topic": "animals"}),
        Document(text="Milvus stores vectors and runs BM25 keyword search.", id_="milvus", metadata={"topic": "db"}),
        Document(text="Sourdough bread rises with wild yeast.", id_="bread", metadata={"topic": "food"})]


@pytest.fixture
def index(milvus_client: Any, milvus_target: Any, collection_name: str, embed_model: Any) -> ConvRAGIndex:
    return ConvRAGIndex.from_documents(DOCS, collection_name=collection_name, embed_model=embed_model,
                                       client=milvus_client, target=milvus_target)


def test_from_documents_writes_our_layout_and_exposes_parts(index, milvus_client, collection_name, embed_model):
    assert index.collection_name == collection_name and index.milvus_client is milvus_client
    assert index.embed_model is embed_model and index.spec.layout == "convrag"
    assert isinstance(index.vector_store, ConvRAGMilvusStore)
    rows = milvus_client.query(collection_name, filter='id != ""', output_fields=["doc_id", "metadata"])
    assert sorted(r["doc_id"] for r in rows) == ["bread", "cats", "milvus"]
    assert {r["doc_id"]: r["metadata"]["topic"] for r in rows}["cats"] == "animals"


def test_as_retriever_returns_hybrid_retriever_and_rejects_unknown_kwargs(index):
    r = index.as_retriever(search_type="hybrid", similarity_top_k=1)
    assert isinstance(r, MilvusHybridRetriever)
    got = r.retrieve("BM25 keyword search")
    assert [n.node.ref_doc_id for n in got] == ["milvus"]
    with pytest.raises(TypeError, match=r"unknown retriever argument\(s\) \['alpha'\]; accepted: \["):
        index.as_retriever(alpha=0.5)


def test_insert_and_delete_ref_doc_go_to_milvus(index, milvus_client, collection_name):
    index.insert(Document(text="Giraffes have long necks.", id_="giraffe"))
    assert index.as_retriever(search_type="sparse", similarity_top_k=1).retrieve("giraffes")[0].node.ref_doc_id == "giraffe"
    index.delete_ref_doc("giraffe")
    left = milvus_client.query(collection_name, filter='doc_id == "giraffe"', output_fields=["doc_id"])
    assert left == []


def test_from_collection_reads_the_schema(index, milvus_client, collection_name, embed_model):
    again = ConvRAGIndex.from_collection(collection_name, embed_model=embed_model, client=milvus_client)
    assert again.spec == index.spec
    assert again.as_retriever(similarity_top_k=1).retrieve("purring cat")[0].node.ref_doc_id == "cats"


def test_as_query_engine_splits_kwargs_and_uses_the_llm(index):
    llm = ScriptedLLM.fixed("They purr.")
    engine = index.as_query_engine(llm=llm, similarity_top_k=1, search_type="hybrid", response_mode="compact")
    response = engine.query("What do cats do?")
    assert str(response) == "They purr."
    assert llm.call_count == 1
    assert "Cats purr and hunt mice at night." in llm.prompts[0] and "What do cats do?" in llm.prompts[0]
    assert "Sourdough" not in llm.prompts[0]
    assert [n.node.ref_doc_id for n in response.source_nodes] == ["cats"]


def test_as_query_engine_passes_a_built_synthesizer_and_rejects_unknowns(index):
    llm = ScriptedLLM.fixed("ok")
    engine = index.as_query_engine(response_synthesizer=get_response_synthesizer(llm=llm), similarity_top_k=2)
    assert str(engine.query("yeast?")) == "ok"
    with pytest.raises(TypeError, match=r"unknown query engine argument\(s\) \['temperature'\]"):
        index.as_query_engine(llm=llm, temperature=0.1)
    with pytest.raises(ValueError, match="needs llm= or response_synthesizer="):
        index.as_query_engine(similarity_top_k=2)


def test_an_llm_assigned_to_settings_answers_query_and_chat_engines(index):
    """The Settings rule of the factory and the chat engine (synthesizers/resolve.py) holds for the index too."""
    llm = ScriptedLLM.fixed("from settings")
    saved, Settings.llm = Settings._llm, llm
    try:
        assert str(index.as_query_engine(similarity_top_k=1).query("yeast?")) == "from settings"
        assert index.as_chat_engine(retriever_kwargs={"similarity_top_k": 1})._llm is llm
    finally:
        Settings._llm = saved


def test_as_chat_engine_serves_our_modes_with_our_retriever(index):
    from llama_index_convrag.chat import ConvRAGChatEngine

    default = index.as_chat_engine(llm=ScriptedLLM.fixed("hi"), retriever_kwargs={"similarity_top_k": 1})
    assert isinstance(default, ConvRAGChatEngine) and isinstance(default._retriever, MilvusHybridRetriever)
    llm = ScriptedLLM.fixed("They purr [1].", chat_model=True)
    engine = index.as_chat_engine(chat_mode="condense_plus_context", llm=llm, retriever_kwargs={"similarity_top_k": 1},
                                  system_prompt="Answer like a vet.", rewrite=RewriteOptions(trigger=None))
    assert isinstance(engine, ConvRAGChatEngine) and isinstance(engine._retriever, MilvusHybridRetriever)
    assert str(engine.chat("What do cats do?")) == "They purr [1]."
    [system, user] = llm.calls[-1].messages
    assert system.role == "system" and "Cats purr and hunt mice at night." in system.content
    assert system.content.endswith("Answer like a vet.") and user.content == "What do cats do?"
    engine.chat("And at night?")
    kinds = [c.kind for c in llm.calls]
    assert len(kinds) == 3  # answer, condense (history), answer
    history = [(m.role, m.content) for m in llm.calls[-1].messages[1:]]
    assert history == [("user", "What do cats do?"), ("assistant", "They purr [1]."), ("user", "And at night?")]


def test_retriever_query_and_chat_engines_share_the_default_configuration(index):
    """One default (hybrid, weighted fusion, dense feedback from the 3 best fused hits) for all three entry points."""
    from llama_index_convrag.retrievers.feedback import Feedback

    llm = ScriptedLLM.fixed("ok")
    retrievers = [index.as_retriever(), index.as_query_engine(llm=llm).retriever,
                  index.as_chat_engine(llm=llm)._retriever]
    got = {(r.params.search_type, r.params.ranker_type, r.params.fusion_depth, r.params.feedback) for r in retrievers}
    assert got == {("hybrid", "weighted", 100, Feedback("embedding", 3, 0.5))}


@pytest.mark.parametrize("mode", ["react", "openai", "condense_plus"])
def test_other_chat_modes_are_refused_naming_ours(index, mode):
    with pytest.raises(ValueError, match=r"chat_mode must be one of \['condense_question', 'condense_plus_context', "
                                         rf"'context', 'best', 'simple'\] \(or None: condense_question\), got '{mode}'"):
        index.as_chat_engine(chat_mode=mode, llm=ScriptedLLM.fixed("hi"))


def test_best_is_condense_plus_context_as_in_core(index):
    from llama_index.core.chat_engine.types import ChatMode
    from llama_index_convrag.chat import ConvRAGChatEngine

    llm = ScriptedLLM.fixed("They purr [1].", chat_model=True)
    for mode in ("best", ChatMode.BEST):
        engine = index.as_chat_engine(chat_mode=mode, llm=llm, retriever_kwargs={"similarity_top_k": 1},
                                      system_prompt="Be brief.")
        assert isinstance(engine, ConvRAGChatEngine) and isinstance(engine._retriever, MilvusHybridRetriever)
        assert engine._context_chat is not None and engine.rephrase_question is False
        assert str(engine.chat("What do cats do?")) == "They purr [1]."
        system = llm.calls[-1].messages[0]
        assert "Cats purr and hunt mice at night." in system.content and system.content.endswith("Be brief.")


def test_simple_is_cores_simple_chat_engine_with_the_llm_alone(index):
    from llama_index.core.chat_engine import SimpleChatEngine

    llm = ScriptedLLM.fixed("Hello.", chat_model=True)
    engine = index.as_chat_engine(chat_mode="simple", llm=llm, system_prompt="Be kind.")
    assert type(engine) is SimpleChatEngine
    assert str(engine.chat("Hi")) == "Hello."
    assert [(m.role.value, m.content) for m in llm.calls[-1].messages] == [("system", "Be kind."), ("user", "Hi")]
    with pytest.raises(TypeError, match=r"chat_mode='simple' \(core's SimpleChatEngine: the LLM alone\) does not take "
                                        r"\['retriever_kwargs'\]; accepted: \['llm', 'system_prompt'"):
        index.as_chat_engine(chat_mode="simple", llm=llm, retriever_kwargs={"similarity_top_k": 2})


def test_as_chat_engine_without_an_llm_answers_extractively(index):
    """``llm=None``: retrieval-only turns with extractive answers, no response mode named."""
    engine = index.as_chat_engine(llm=None, retriever_kwargs={"similarity_top_k": 1})
    first = engine.chat("What do cats do at night?")
    assert str(first) == "Cats purr and hunt mice at night. [1]"
    assert first.source_nodes[0].node.ref_doc_id == "cats"
    assert str(engine.chat("And what do they hunt?")) == "Cats purr and hunt mice at night. [1]"
    with pytest.raises(ValueError, match=r"as_chat_engine needs an LLM: .* pass llm=None \(extractive answers\) .*"
                                         r"got response_mode='compact'"):
        index.as_chat_engine(llm=None, answer=AnswerOptions(response_mode="compact"))


def test_from_vector_store_of_our_store_searches_and_inserts(index, embed_model):
    again = ConvRAGIndex.from_vector_store(index.vector_store, embed_model=embed_model)
    assert again.spec == index.spec and again.collection_name == index.collection_name
    assert isinstance(again.vector_store, ConvRAGMilvusStore)
    again.insert(Document(text="Giraffes have long necks.", id_="giraffe"))
    got = index.as_retriever(search_type="sparse", similarity_top_k=1).retrieve("giraffes")
    assert [n.node.ref_doc_id for n in got] == ["giraffe"]


def test_from_vector_store_takes_an_embed_model_assigned_to_settings(index, embed_model, monkeypatch):
    monkeypatch.setattr(Settings, "_embed_model", embed_model)
    assert ConvRAGIndex.from_vector_store(index.vector_store).embed_model is embed_model


def test_from_vector_store_names_what_it_reads(embed_model):
    from llama_index.core.vector_stores import SimpleVectorStore

    with pytest.raises(ValueError, match=r"pass a ConvRAGMilvusStore or LlamaIndex's MilvusVectorStore .*, "
                                         r"got SimpleVectorStore"):
        ConvRAGIndex.from_vector_store(SimpleVectorStore(), embed_model=embed_model)
