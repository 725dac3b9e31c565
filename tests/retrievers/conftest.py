"""A small real collection (our layout, real embeddings) shared by the retriever tests in this folder."""

from __future__ import annotations

from typing import Any, Iterator, List

import pytest

from llama_index_convrag.milvus.schema import create_collection, default_spec

PASSAGES: List[dict] = [
    {"id": "p01", "doc": "cats", "text": "Cats are small carnivorous mammals often kept as house pets.", "meta": {"topic": "animals", "year": 2001, "tags": ["pets", "cats"]}},
    {"id": "p02", "doc": "cats", "text": "A cat purrs when content and hunts mice at night.", "meta": {"topic": "animals", "year": 2003, "tags": ["cats"]}},
    {"id": "p03", "doc": "dogs", "text": "Dogs are loyal companions descended from wolves.", "meta": {"topic": "animals", "year": 2005, "tags": ["pets", "dogs"]}},
    {"id": "p04", "doc": "milvus", "text": "Milvus is a vector database that supports BM25 full text search.", "meta": {"topic": "databases", "year": 2019, "tags": ["vectors"]}},
    {"id": "p05", "doc": "milvus", "text": "Hybrid search combines dense vectors with sparse BM25 scores.", "meta": {"topic": "databases", "year": 2024, "tags": ["vectors", "search"]}},
    {"id": "p06", "doc": "python", "text": "Python is a programming language with dynamic typing.", "meta": {"topic": "programming", "year": 1991, "tags": ["code"]}},
    {"id": "p07", "doc": "python", "text": "The asyncio library runs coroutines on an event loop.", "meta": {"topic": "programming", "year": 2014, "tags": ["code", "async"]}},
    {"id": "p08", "doc": "bread", "text": "Bread dough rises because yeast produces carbon dioxide.", "meta": {"topic": "cooking", "year": 2010, "tags": ["baking"]}},
    {"id": "p09", "doc": "bread", "text": "Sourdough uses a wild yeast starter instead of commercial yeast.", "meta": {"topic": "cooking", "year": 2012, "tags": ["baking"]}},
    {"id": "p10", "doc": "space", "text": "The Moon orbits the Earth roughly every twenty seven days.", "meta": {"topic": "space", "year": 1969, "tags": ["moon"]}},
    {"id": "p11", "doc": "space", "text": "Mars is called the red planet because of iron oxide dust.", "meta": {"topic": "space", "year": 1976, "tags": ["mars"]}},
    {"id": "p12", "doc": "tea", "text": "Green tea contains caffeine and antioxidants called catechins.", "meta": {"topic": "cooking", "year": 2008, "tags": ["drinks"]}},
    {"id": "p13", "doc": "retrieval", "text": "Reciprocal rank fusion merges ranked lists from several retrievers.", "meta": {"topic": "databases", "year": 2009, "tags": ["search"]}},
    {"id": "p14", "doc": "retrieval", "text": "Keyword search with BM25 matches exact terms such as product codes XJ-9000.", "meta": {"topic": "databases", "year": 2015, "tags": ["search"]}},
    {"id": "p15", "doc": "pets", "text": "Feeding a kitten requires food rich in protein.", "meta": {"topic": "animals", "year": 2020, "tags": ["pets", "cats"]}},
    {"id": "p16", "doc": "hostile", "text": "A note about quoting rules.", "meta": {"topic": "x\" or 1==1 or \"y", "year": 0, "tags": []}},
]


@pytest.fixture(scope="package")
def corpus_collection(milvus_client: Any, embed_model: Any) -> Iterator[str]:
    name = "retrievers_corpus"
    if milvus_client.has_collection(name):
        milvus_client.drop_collection(name)
    create_collection(milvus_client, name, default_spec(384))
    vectors = embed_model.embed([p["text"] for p in PASSAGES])
    rows = [{"id": p["id"], "doc_id": p["doc"], "text": p["text"], "embedding": v.tolist(), "metadata": p["meta"]}
            for p, v in zip(PASSAGES, vectors)]
    milvus_client.insert(name, rows)
    yield name
    milvus_client.drop_collection(name)
