"""``index_corpus``: one row per document with the data set's ids; reuse, refusal and rebuild."""

import pytest

from llama_index_convrag.evaluation.datasets import Document
from llama_index_convrag.evaluation.indexing import collection_rows, index_corpus

CORPUS = {"d1": Document("d1", "Green tea steeps for two minutes.", title="Tea"),
          "d2": Document("d2", "Sourdough needs a starter.")}


def test_index_reuse_refuse_rebuild(milvus_client, collection_name, embed_model):
    kw = dict(client=milvus_client, collection_name=collection_name, embed_model=embed_model)
    assert index_corpus(CORPUS, **kw) is True
    rows = milvus_client.query(collection_name, filter='id != ""', output_fields=["doc_id", "text"])
    assert sorted((r["id"], r["doc_id"], r["text"]) for r in rows) == [
        ("d1", "d1", "Tea\nGreen tea steeps for two minutes."), ("d2", "d2", "Sourdough needs a starter.")]
    assert index_corpus(CORPUS, **kw) is False  # same size: reused, nothing embedded
    bigger = {**CORPUS, "d3": Document("d3", "Chains need oil.")}
    with pytest.raises(ValueError, match=r"exists with 2 rows .* corpus has 3 documents"):
        index_corpus(bigger, **kw)
    assert collection_rows(milvus_client, collection_name) == 2
    assert index_corpus(bigger, rebuild=True, **kw) is True
    assert collection_rows(milvus_client, collection_name) == 3
    with pytest.raises(ValueError, match="corpus is empty"):
        index_corpus({}, **kw)
