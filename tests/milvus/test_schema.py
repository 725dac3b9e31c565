from typing import Any

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from pymilvus import DataType, Function, FunctionType

from llama_index_convrag.milvus.schema import (
    BM25,
    DENSE,
    CollectionSpec,
    VectorField,
    check_embed_model,
    create_collection,
    default_spec,
    detect_spec,
    way_out,
)
from llama_index_convrag.rank_trail import get_trail
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever

TEXTS = ["Cats hunt mice at night.", "Milvus runs BM25 full text search.", "Bread rises with yeast."]


def test_create_and_detect_our_layout_with_an_extra_dense_field(milvus_client: Any, collection_name: str):
    spec = default_spec(8, {"title_embedding": 8})
    create_collection(milvus_client, collection_name, spec, analyzer="standard")
    got = detect_spec(milvus_client, collection_name)
    assert got == spec
    assert got.dense_fields == ("embedding", "title_embedding") and got.bm25_fields == ("sparse_embedding",)
    assert got.output_fields() == ["text", "doc_id", "metadata"]
    create_collection(milvus_client, collection_name, spec)  # existing: no-op


def test_a_collection_records_the_model_that_wrote_it_and_refuses_another(milvus_client: Any,
                                                                          collection_name: str):
    create_collection(milvus_client, collection_name, default_spec(8, embed_model="Local:minilm:fp32"))
    got = detect_spec(milvus_client, collection_name)
    assert got.embed_model == "Local:minilm:fp32"
    check_embed_model(got, "Local:minilm:fp32", collection_name)
    check_embed_model(got, None, collection_name)  # a caller that names no model cannot be checked
    with pytest.raises(ValueError, match=rf"collection '{collection_name}' holds vectors of 'Local:minilm:fp32'; this "
                                         r"embedding model is 'Local:minilm:int8-x': vectors of two models \(or two "
                                         r"variants of one\) never mix"):
        check_embed_model(got, "Local:minilm:int8-x", collection_name)
    with pytest.raises(ValueError, match=r"Use the model that wrote it, or ingest into another collection$"):
        check_embed_model(got, "Local:minilm:int8-x", collection_name)
    unrecorded = default_spec(8)
    assert unrecorded.embed_model is None and unrecorded == got  # the record is not part of the layout
    check_embed_model(unrecorded, "anything", collection_name)  # made before the record: cannot be checked


def test_another_variant_of_the_local_model_is_told_the_setting_that_opens_the_collection():
    fp32 = "LocalMiniLMEmbedding:all-MiniLM-L6-v2-onnx-int8:fp32"
    int8 = "LocalMiniLMEmbedding:all-MiniLM-L6-v2-onnx-int8:int8-1cc93e918e"
    with pytest.raises(ValueError, match=r"Open it with the fp32 variant that wrote it \(CONVRAG_EMBED_MODEL=local:"
                                         r"fp32 or LocalMiniLMEmbedding\(variant='fp32'\)\), or ingest into another"):
        check_embed_model(default_spec(8, embed_model=fp32), int8, "docs")
    with pytest.raises(ValueError, match=r"Open it with the int8 variant .*CONVRAG_EMBED_MODEL=local:int8 "):
        check_embed_model(default_spec(8, embed_model=int8), fp32, "docs")
    assert way_out(fp32, "OpenAIEmbedding:text-embedding-3-small") == "Use the model that wrote it"
    earlier = "LocalMiniLMEmbedding:all-MiniLM-L6-v2-onnx-int8:int8-1cc93e918e"  # int8 before the fused graph
    assert way_out(earlier, int8.replace("int8-", "int8-fuse1-")).startswith("Its int8 vectors come from another build")


def test_create_rejects_unknown_analyzer(milvus_client: Any, collection_name: str):
    with pytest.raises(ValueError, match="analyzer must be one of .*got 'klingon'"):
        create_collection(milvus_client, collection_name, default_spec(4), analyzer="klingon")
    assert not milvus_client.has_collection(collection_name)


def test_detect_llamaindex_milvus_vector_store_layout_and_retrieve(milvus_target, milvus_client, collection_name,
                                                                   embed_model):
    from llama_index.vector_stores.milvus import MilvusVectorStore

    store = MilvusVectorStore(uri=milvus_target.uri, collection_name=collection_name, dim=384, enable_sparse=True,
                              similarity_metric="IP")
    nodes = []
    for i, (text, vec) in enumerate(zip(TEXTS, embed_model.embed(TEXTS))):
        n = TextNode(id_=f"n{i}", text=text, metadata={"source": f"s{i}"}, embedding=vec.tolist())
        n.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=f"doc{i}")
        nodes.append(n)
    store.add(nodes)
    spec = detect_spec(milvus_client, collection_name)
    assert spec.layout == "llamaindex"
    assert (spec.primary_field, spec.doc_id_field, spec.text_field) == ("id", "doc_id", "text")
    assert spec.dense_fields == ("embedding",) and spec.bm25_fields == ("sparse_embedding",)
    assert spec.fields_by_name["embedding"].metric == "IP"
    assert spec.metadata_field is None and spec.node_content_field == "_node_content"
    r = MilvusHybridRetriever.from_defaults(collection_name=collection_name, embed_model=embed_model,
                                            client=milvus_client, search_type="hybrid", ranker_type="rrf",
                                            similarity_top_k=2)
    got = r.retrieve("full text search with BM25")
    assert got[0].node_id == "n1" and got[0].node.ref_doc_id == "doc1"
    assert got[0].node.metadata["source"] == "s1" and got[0].node.text == TEXTS[1]
    assert get_trail(got[0])[-1]["stage"] == "fusion:rrf"
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    only = r.with_params(filters=MetadataFilters(filters=[MetadataFilter(key="source", value="s2")])).retrieve("yeast")
    assert [n.node_id for n in only] == ["n2"]


def test_detect_langchain_milvus_layout(milvus_client: Any, collection_name: str, embed_model):
    """langchain-milvus is not installed here: this builds its default BM25 layout by hand (pk/text/vector/sparse,
    metadata as scalar fields) as ``Milvus(..., builtin_function=BM25BuiltInFunction())`` creates it."""
    schema = milvus_client.create_schema(auto_id=True, enable_dynamic_field=False)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("text", DataType.VARCHAR, max_length=4096, enable_analyzer=True)
    schema.add_field("source", DataType.VARCHAR, max_length=256)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=384)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["text"],
                                 output_field_names=["sparse"]))
    params = milvus_client.prepare_index_params()
    params.add_index("vector", index_type="AUTOINDEX", metric_type="L2")
    params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    milvus_client.create_collection(collection_name, schema=schema, index_params=params)
    milvus_client.insert(collection_name, [{"text": t, "source": f"s{i}", "vector": v.tolist()}
                                           for i, (t, v) in enumerate(zip(TEXTS, embed_model.embed(TEXTS)))])
    spec = detect_spec(milvus_client, collection_name)
    assert spec == CollectionSpec(primary_field="pk", doc_id_field=None, text_field="text",
                                  vector_fields=(VectorField("vector", DENSE, "L2", 384), VectorField("sparse", BM25, "BM25")),
                                  metadata_field=None, scalar_metadata_fields=("source",), dynamic=False,
                                  layout="langchain")
    r = MilvusHybridRetriever.from_defaults(collection_name=collection_name, embed_model=embed_model,
                                            client=milvus_client, search_type="hybrid", ranker_type="weighted",
                                            similarity_top_k=3)
    got = r.retrieve("cats and mice")
    assert got[0].node.text == TEXTS[0] and got[0].node.metadata["source"] == "s0"
    assert got[0].node_id.isdigit()  # INT64 primary keys come back as strings


def test_detect_missing_collection_names_it(milvus_client: Any):
    with pytest.raises(ValueError, match="collection 'nope_missing' does not exist"):
        detect_spec(milvus_client, "nope_missing")


def test_english_analyzer_is_used_where_milvus_has_it_else_the_lite3_fallback(milvus_client, collection_name, caplog):
    """Milvus Lite 2.5.1 / servers keep the stemming ``english`` analyzer; Milvus Lite 3.x (tokenizers ``standard``
    and ``jieba`` only) refuses it and the collection is created with the fallback, with a warning naming it."""
    import importlib.metadata
    import json as _json

    from llama_index_convrag.milvus.schema import ANALYZERS, LITE3_ANALYZERS

    create_collection(milvus_client, collection_name, default_spec(dim=2))
    [text] = [f for f in milvus_client.describe_collection(collection_name)["fields"] if f["name"] == "text"]
    got = _json.loads(text["params"]["analyzer_params"])
    lite3 = importlib.metadata.version("milvus-lite").split(".")[0] == "3"
    assert got == (LITE3_ANALYZERS["english"] if lite3 else ANALYZERS["english"])
    assert ("Milvus refused the 'english' analyzer" in caplog.text) is lite3
    milvus_client.insert(collection_name, [{"id": "a", "doc_id": "a", "text": "The cats purr", "embedding": [1.0, 0.0],
                                            "metadata": {}}])
    [hits] = milvus_client.search(collection_name, data=["cats"], anns_field="sparse_embedding", limit=1,
                                  search_params={"metric_type": "BM25"})
    assert [h["id"] for h in hits] == ["a"]
    [hits] = milvus_client.search(collection_name, data=["the"], anns_field="sparse_embedding", limit=1,
                                  search_params={"metric_type": "BM25"})
    assert hits == []  # a stop word in both analyzers
