"""LlamaIndex's own ``MilvusVectorStore`` (llama-index-vector-stores-milvus, its defaults) reading collections we
wrote, through both of our writers (``convrag ingest``'s pipeline and ``ConvRAGIndex`` / ``ConvRAGMilvusStore``).
The reverse direction (ours reading theirs) is ``test_schema.py::test_detect_llamaindex_milvus_vector_store_layout_and_retrieve``."""

import importlib.metadata
from typing import Any, List

import pytest
from llama_index.core.schema import Document
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
from pymilvus import MilvusException

from llama_index_convrag.indices import ConvRAGIndex
from llama_index_convrag.ingest.pipeline import ingest

TEXTS = {"cats.txt": "Cats purr and hunt mice at night.", "milvus.txt": "Milvus runs BM25 keyword search over text.",
         "bread.txt": "Sourdough bread rises with wild yeast."}


@pytest.fixture(params=["ingest", "index"])
def ours(request: Any, tmp_path: Any, milvus_client: Any, milvus_target: Any, collection_name: str,
         embed_model: Any) -> str:
    """A collection written by one of our writers; every node carries metadata ``topic``."""
    if request.param == "ingest":
        for name, text in TEXTS.items():
            (tmp_path / name).write_text(text)
        ingest([tmp_path], collection_name=collection_name, embed_model=embed_model, client=milvus_client,
               target=milvus_target)
    else:
        docs = [Document(text=t, id_=n, metadata={"file_name": n}) for n, t in TEXTS.items()]
        ConvRAGIndex.from_documents(docs, collection_name=collection_name, embed_model=embed_model,
                                    client=milvus_client, target=milvus_target)
    return collection_name


def theirs(milvus_target: Any, collection_name: str, **kw: Any) -> Any:
    from llama_index.vector_stores.milvus import MilvusVectorStore

    return MilvusVectorStore(uri=milvus_target.uri, collection_name=collection_name, **kw)


def query(store: Any, embed_model: Any, text: str, mode: VectorStoreQueryMode) -> List[Any]:
    q = VectorStoreQuery(query_embedding=embed_model.get_query_embedding(text), query_str=text,
                         similarity_top_k=2, mode=mode)
    return store.query(q).nodes


def test_their_defaults_read_our_collection_dense_with_metadata_and_source(ours, milvus_target, embed_model):
    store = theirs(milvus_target, ours)
    [top, _] = query(store, embed_model, "what do cats hunt", VectorStoreQueryMode.DEFAULT)
    assert top.get_content() == TEXTS["cats.txt"]
    assert top.metadata["file_name"] == "cats.txt"
    assert top.ref_doc_id is not None and top.ref_doc_id == top.metadata.get("doc_id", top.ref_doc_id)


@pytest.mark.divergence("milvus-hybrid-metric")
def test_their_hybrid_needs_the_cosine_metric_and_bm25_function_named(ours, milvus_target, embed_model):
    """Their hybrid search sends ``similarity_metric`` (default ``IP``) for the dense field, ours is ``COSINE``:
    Milvus refuses the mismatch (a documented divergence). Their default sparse function is picked from
    ``describe_collection``'s functions, which Milvus Lite 2.5.1 reports empty (for their own collections too), so
    ``BM25BuiltInFunction()`` is named. With both named, hybrid and BM25-only search read our collection."""
    from llama_index.vector_stores.milvus.utils import BM25BuiltInFunction

    ip = theirs(milvus_target, ours, enable_sparse=True, sparse_embedding_function=BM25BuiltInFunction())
    lite3 = importlib.metadata.version("milvus-lite").startswith("3.")
    if lite3:  # Milvus Lite 3.x does not check a request's metric against the index's
        assert query(ip, embed_model, "BM25 keyword", VectorStoreQueryMode.HYBRID)
    else:
        with pytest.raises(MilvusException, match=r"metric type not match"):
            query(ip, embed_model, "BM25 keyword", VectorStoreQueryMode.HYBRID)
    store = theirs(milvus_target, ours, enable_sparse=True, sparse_embedding_function=BM25BuiltInFunction(),
                   similarity_metric="COSINE")
    top = query(store, embed_model, "BM25 keyword", VectorStoreQueryMode.HYBRID)[0]
    assert top.get_content() == TEXTS["milvus.txt"] and top.metadata["file_name"] == "milvus.txt"
    if lite3:  # their BM25-only request sets drop_ratio_search, which Milvus Lite 3.x refuses on any collection
        with pytest.raises(MilvusException, match=r"only drop_ratio_search=0 is supported"):
            query(store, embed_model, "sourdough yeast", VectorStoreQueryMode.TEXT_SEARCH)
        return
    sparse = query(store, embed_model, "sourdough yeast", VectorStoreQueryMode.TEXT_SEARCH)[0]
    assert sparse.get_content() == TEXTS["bread.txt"] and sparse.metadata["file_name"] == "bread.txt"


def test_our_reader_ignores_the_llamaindex_fields(ours, milvus_client, embed_model):
    from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever

    r = MilvusHybridRetriever.from_defaults(collection_name=ours, embed_model=embed_model, client=milvus_client,
                                            similarity_top_k=1)
    [hit] = r.retrieve("sourdough yeast")
    assert hit.node.get_content() == TEXTS["bread.txt"] and hit.node.metadata["file_name"] == "bread.txt"
    assert "_node_content" not in hit.node.metadata and "_node_type" not in hit.node.metadata


def test_from_vector_store_of_their_store_on_our_collection_writes_our_layout(ours, milvus_target, embed_model):
    """``ConvRAGIndex.from_vector_store`` over their store opened on our collection: our layout, our retriever, and
    inserts through our store (their ``add`` cannot write our layout: the next test)."""
    from llama_index_convrag.milvus.vector_store import ConvRAGMilvusStore

    index = ConvRAGIndex.from_vector_store(theirs(milvus_target, ours), embed_model=embed_model)
    assert index.spec.layout == "convrag" and isinstance(index.vector_store, ConvRAGMilvusStore)
    index.insert(Document(text="Giraffes have long necks.", id_="giraffe", metadata={"file_name": "g.txt"}))
    [hit] = index.as_retriever(search_type="hybrid", similarity_top_k=1).retrieve("giraffes necks")
    assert hit.node.ref_doc_id == "giraffe" and hit.node.metadata["file_name"] == "g.txt"


@pytest.mark.divergence("milvus-add-metadata-field")
def test_their_add_into_our_collection_is_refused_by_milvus(ours, milvus_target, embed_model):
    """Our layout keeps metadata in a required JSON field ``metadata``, which their rows lack, and Milvus Lite
    2.5.1 has no optional (nullable) fields; writes go through ``ConvRAGMilvusStore`` / ``ConvRAGIndex.insert``."""
    from llama_index.core.schema import TextNode
    from pymilvus.exceptions import DataNotMatchException

    node = TextNode(text="Giraffes have long necks.", embedding=embed_model.get_text_embedding("giraffes"))
    with pytest.raises((DataNotMatchException, MilvusException), match=r"metadata"):
        theirs(milvus_target, ours).add([node])


def test_from_vector_store_of_their_own_collection_inserts_through_their_store(milvus_target, collection_name,
                                                                            embed_model):
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.milvus import MilvusVectorStore

    store = MilvusVectorStore(uri=milvus_target.uri, collection_name=collection_name, dim=384)
    store.add([TextNode(text=TEXTS["cats.txt"], id_="c", embedding=embed_model.get_text_embedding(TEXTS["cats.txt"]))])
    index = ConvRAGIndex.from_vector_store(store, embed_model=embed_model)
    assert index.spec.layout == "llamaindex" and index.vector_store is store
    index.insert(Document(text=TEXTS["bread.txt"], id_="bread"))
    [hit] = index.as_retriever(search_type="dense", similarity_top_k=1).retrieve("sourdough yeast")
    assert hit.node.get_content() == TEXTS["bread.txt"] and hit.node.ref_doc_id == "bread"
