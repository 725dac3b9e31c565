"""Chat fixtures: a small real Milvus Lite index (LlamaIndex VectorStoreIndex), stores, token counters."""

from __future__ import annotations

from typing import Any, Iterator, List

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_convrag.storage.conversation import SQLiteConversationStore

DOCS = [
    ("inception", "Inception is a 2010 science fiction film directed by Christopher Nolan."),
    ("nolan", "Christopher Nolan also directed Interstellar, released in 2014, and Oppenheimer in 2023."),
    ("paris", "Paris is the capital of France and home of the Eiffel Tower, built in 1889."),
    ("berlin", "Berlin is the capital of Germany; the Berlin Wall fell in 1989."),
    ("milvus", "Milvus is an open-source vector database built for similarity search."),
    ("bm25", "BM25 is a bag-of-words ranking function used by search engines."),
]


def word_count(text: str) -> int:
    """A deterministic token counter for exact budget assertions."""
    return len(text.split())


@pytest.fixture
def index(milvus_target: Any, collection_name: str, embed_model: Any) -> VectorStoreIndex:
    from llama_index.vector_stores.milvus import MilvusVectorStore

    store = MilvusVectorStore(uri=milvus_target.uri, collection_name=collection_name, dim=384, overwrite=True)
    nodes = [TextNode(id_=key, text=text) for key, text in DOCS]
    return VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                            embed_model=embed_model)


@pytest.fixture
def retriever(index: VectorStoreIndex) -> BaseRetriever:
    return index.as_retriever(similarity_top_k=3)


@pytest.fixture
def store(tmp_path: Any) -> Iterator[SQLiteConversationStore]:
    s = SQLiteConversationStore(tmp_path / "conv.db")
    yield s
    s.close()


class FixedRetriever(BaseRetriever):
    """Returns the same pre-built nodes for every query (or none); records queries."""

    def __init__(self, nodes: List[NodeWithScore]) -> None:
        super().__init__()
        self.nodes = nodes
        self.queries: List[str] = []

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        return [NodeWithScore(node=n.node, score=n.score) for n in self.nodes]


class EmptyRetriever(FixedRetriever):
    def __init__(self) -> None:
        super().__init__([])
