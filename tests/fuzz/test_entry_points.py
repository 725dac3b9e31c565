"""Property-based fuzzing (hypothesis, derandomized, modest example counts) of public entry points with hostile
input: metadata filter values through the retriever on real Milvus Lite, and arbitrary file bytes through the
readers. Properties: only the documented exception types, and a filter value never changes the expression's
meaning (an equality filter returns exactly the row holding that value)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.schema import QueryBundle
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_convrag.milvus.schema import create_collection, default_spec
from llama_index_convrag.ingest.readers import UnsupportedFile, decode_text, read_file
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever

FUZZ = settings(max_examples=40, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
HOSTILE = st.one_of(
    st.text(max_size=40),
    st.sampled_from(['" or true or "', '\\"', "\\", 'a" || "1"=="1', "%", "_", "\n", "x\\\n", "' or 1=1 --",
                     "json_contains(metadata, 1)", "]", "[", "\u0000", "😀", "متن"]),
)
DIM = 8


@pytest.fixture(scope="module")
def table(milvus_client):
    name = "fuzz_filters"
    if milvus_client.has_collection(name):
        milvus_client.drop_collection(name)
    create_collection(milvus_client, name, default_spec(DIM))
    yield name
    milvus_client.drop_collection(name)


def _row(pk: str, tag, vector):
    return {"id": pk, "doc_id": pk, "text": f"row {pk}", "embedding": vector, "metadata": {"tag": tag}}


def _retrieve(client, name, model, op, value):
    """Ids retrieved with a filter on ``tag`` (the query vector is given, so the model is not run)."""
    filters = MetadataFilters(filters=[MetadataFilter(key="tag", value=value, operator=op)])
    r = MilvusHybridRetriever.from_defaults(collection_name=name, client=client, embed_model=model,
                                            search_type="dense", similarity_top_k=10, filters=filters)
    return sorted(n.node.node_id for n in r.retrieve(QueryBundle(query_str="q", embedding=[1.0] * DIM)))


@FUZZ
@given(value=HOSTILE, decoy=HOSTILE)
def test_filter_values_never_change_the_expression(milvus_client, embed_model, table, value, decoy):
    milvus_client.delete(table, filter='id != ""')
    milvus_client.insert(table, [_row("a", value, [1.0] * DIM), _row("b", decoy, [1.0] * DIM)])
    try:
        eq = _retrieve(milvus_client, table, embed_model, FilterOperator.EQ, value)
    except ValueError as exc:  # the documented refusals: carriage returns; control characters are stored fine
        assert "\r" in value and "carriage return" in str(exc)
        return
    same = value == decoy
    assert eq == (["a", "b"] if same else ["a"])
    assert _retrieve(milvus_client, table, embed_model, FilterOperator.NE, value) == ([] if same else ["b"])
    assert _retrieve(milvus_client, table, embed_model, FilterOperator.IN, [value]) == eq


@FUZZ
@given(st.binary(max_size=4096))
def test_any_bytes_decode_or_are_refused_as_binary(data):
    try:
        text, encoding = decode_text(data, "f.txt")
    except UnsupportedFile as exc:
        assert str(exc).startswith("binary file: 'f.txt'")
        return
    assert isinstance(text, str) and encoding
    text.encode(encoding.replace("-sig", ""), errors="strict")  # a real decode: it encodes back without loss
    assert "\ufffd" not in text or "\ufffd".encode(encoding.replace("-sig", "")) in data


@settings(max_examples=30, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2048), suffix=st.sampled_from([".txt", ".md", ".html", ".pdf", ".docx", ".bin"]))
def test_read_file_raises_only_documented_errors(tmp_path_factory, data, suffix):
    path = Path(tmp_path_factory.mktemp("fuzz")) / f"f{suffix}"
    path.write_bytes(data)
    try:
        docs = read_file(path)
    except UnsupportedFile:
        return
    except ValueError as exc:  # a parser failed: the message names the file
        assert str(exc).startswith("cannot parse 'f")
        return
    assert all(isinstance(d.text, str) for d in docs)
