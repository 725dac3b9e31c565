"""ingest/writer.py: one writer in order against real Milvus Lite; a replaced document's old chunks go just before
its first new chunk; an insert error reaches the caller."""

from typing import Any, List

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_convrag.ingest.embed_stage import EmbeddedBatch
from llama_index_convrag.ingest.prepare import to_chunks
from llama_index_convrag.ingest.writer import BatchWriter
from llama_index_convrag.milvus.schema import create_collection, default_spec

SPEC = default_spec(2)


def batch(doc: str, ids: List[str]) -> EmbeddedBatch:
    nodes = [TextNode(id_=i, text=f"text {i}", metadata={"chunk": n},
                      relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)})
             for n, i in enumerate(ids)]
    return EmbeddedBatch(to_chunks(SPEC, nodes, keep_nodes=False), {"embedding": [[1.0, 0.0]] * len(ids)}, 0.0, None,
                         0)


def ids_of(client: Any, name: str) -> List[str]:
    return sorted(r["id"] for r in client.query(name, filter='id != ""', output_fields=["id"]))


def test_batches_are_stored_in_order_and_old_chunks_go_before_the_first_new_one(milvus_client, collection_name):
    create_collection(milvus_client, collection_name, SPEC)
    milvus_client.insert(collection_name, [{"id": "old", "doc_id": "d1", "text": "old", "metadata": {},
                                            "embedding": [0.0, 1.0]}])
    seen: List[dict] = []
    writer = BatchWriter(milvus_client, collection_name, SPEC, queue_size=1, on_stored=lambda c: seen.append(dict(c)))
    writer.replace("d1")
    writer.put(batch("d1", ["a", "b"]))
    writer.put(batch("d1", ["c"]))  # the same document's second batch must not delete the first
    writer.put(batch("d2", ["x"]))
    writer.close()
    assert ids_of(milvus_client, collection_name) == ["a", "b", "c", "x"]
    assert dict(writer.stored) == {"d1": 3, "d2": 1} and seen == [{"d1": 2}, {"d1": 1}, {"d2": 1}]
    assert writer.insert_seconds > 0


def test_an_insert_error_is_raised_to_the_caller(milvus_client, collection_name):
    writer = BatchWriter(milvus_client, collection_name, SPEC, queue_size=1)  # the collection does not exist
    writer.put(batch("d", ["a"]))
    with pytest.raises(Exception, match="collection not found"):
        writer.close()
