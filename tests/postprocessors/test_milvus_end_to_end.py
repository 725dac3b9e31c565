"""One real run: LlamaIndex's MilvusVectorStore on Milvus Lite, the local model, then our postprocessors."""

from __future__ import annotations

import uuid

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.vector_stores.milvus import MilvusVectorStore

from llama_index_convrag.postprocessors import (
    BudgetedCoverageSelector,
    MMRPostprocessor,
    ModelRerank,
    SimilarityThreshold,
)
from llama_index_convrag.postprocessors.scorers import EmbeddingScorer, HTTPRerankScorer
from llama_index_convrag.rank_trail import get_trail
from llama_index_convrag.testing import ScriptedLLM

FILLER = ("The annual report lists the museum's opening hours, ticket prices, staff changes, the new cafe menu, "
          "parking rules, accessibility services, school visit bookings and volunteer programmes. ") * 8
DOCS = {
    "eiffel": "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    "eiffel2": "Completed in 1889, the Eiffel Tower was built in Paris for the Exposition Universelle.",
    "louvre": FILLER + "The Louvre holds the Mona Lisa, painted by Leonardo da Vinci.",
    "colosseum": "The Colosseum in Rome is an amphitheatre built under the Flavian emperors.",
    "photosynthesis": "Photosynthesis converts light energy into chemical energy in plant chloroplasts.",
    "mitochondria": "Mitochondria produce most of the cell's ATP through oxidative phosphorylation.",
    "python": "Python is a programming language known for its readable syntax.",
    "milvus": "Milvus is a vector database built for similarity search over embeddings.",
    "everest": "Mount Everest is the highest mountain above sea level, on the Nepal-China border.",
    "nile": "The Nile is a major river flowing north through northeastern Africa.",
}


@pytest.fixture(scope="module")
def index(milvus_target, milvus_client, embed_model):
    """Built once for this module (the tests only read it); dropped afterwards."""
    name = f"pp_e2e_{uuid.uuid4().hex[:8]}"
    store = MilvusVectorStore(uri=milvus_target.uri, collection_name=name, dim=384, overwrite=True)
    nodes = [TextNode(id_=key, text=text) for key, text in DOCS.items()]
    yield VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                           embed_model=embed_model)
    milvus_client.drop_collection(name)


def test_retrieve_then_rerank_mmr_threshold_budget(index, embed_model):
    query = "Who painted the Mona Lisa and where is it?"
    retrieved = index.as_retriever(similarity_top_k=len(DOCS)).retrieve(query)
    assert len(retrieved) == len(DOCS)
    first_rank = [n.node.node_id for n in retrieved].index("louvre") + 1
    assert first_rank > 1  # the answer hides after filler: dense search over the truncated text misses it

    reranked = ModelRerank(EmbeddingScorer(embed_model, window_words=32, overlap_words=8), top_n=4) \
        .postprocess_nodes(retrieved, query_bundle=QueryBundle(query))
    assert reranked[0].node.node_id == "louvre"
    trail = get_trail(reranked[0])[-1]
    assert (trail["stage"], trail["rank"], trail["prev_rank"]) == ("rerank", 1, first_rank)
    assert trail["prev_score"] == pytest.approx(retrieved[first_rank - 1].score)

    kept = SimilarityThreshold(0.3, score_kind="rerank").postprocess_nodes(reranked)
    assert kept[0].node.node_id == "louvre" and len(kept) < len(reranked)


async def test_async_pipeline_with_mmr_and_budget(index, embed_model):
    query = "When was the Eiffel Tower built?"
    retrieved = await index.as_retriever(similarity_top_k=5).aretrieve(query)
    assert {n.node.node_id for n in retrieved[:2]} == {"eiffel", "eiffel2"}
    diverse = await MMRPostprocessor(embed_model=embed_model, lambda_mult=0.3, top_n=3).apostprocess_nodes(
        retrieved, query_str=query)
    top2 = [n.node.node_id for n in diverse[:2]]
    assert top2[0] in {"eiffel", "eiffel2"} and top2[1] not in {"eiffel", "eiffel2"}
    budget = await BudgetedCoverageSelector(30, embed_model=embed_model).apostprocess_nodes(
        retrieved, query_str=query)
    assert [n.node.node_id for n in budget] in (["eiffel"], ["eiffel2"])  # one twin (~18 tokens); nothing else fits


def test_query_engine_with_http_rerank(index, openai_server):
    llm = ScriptedLLM.echo()
    reranker = ModelRerank(HTTPRerankScorer(openai_server.base_url, model="local", backoff_s=0.0), top_n=1)
    engine = index.as_query_engine(llm=llm, similarity_top_k=5, node_postprocessors=[reranker])
    response = engine.query("Which river flows through northeastern Africa?")
    assert [n.node.node_id for n in response.source_nodes] == ["nile"]
    assert openai_server.paths() == ["/v1/rerank"]
    assert "The Nile is a major river" in llm.prompts[0] and "convrag_rank_trail" not in llm.prompts[0]
