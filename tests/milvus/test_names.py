"""Collection-name and URI validation in ``milvus.client`` (no I/O), and its use by ``create_collection``."""

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.client import resolve_milvus, validate_collection_name, validate_uri
from llama_index_convrag.milvus.schema import create_collection, default_spec


@pytest.mark.parametrize("name,message", [
    ("my docs", "collection name 'my docs' may only hold ASCII letters, digits and underscores (found ' '); "
                "try 'my_docs'"),
    ("1docs", "collection name '1docs' must start with an ASCII letter or an underscore; try 'c_1docs'"),
    ("", "collection name '' is empty; try 'convrag'"),
])
def test_validate_collection_name(name, message):
    with pytest.raises(ConfigurationError) as info:
        validate_collection_name(name)
    assert str(info.value) == message


def test_create_collection_refuses_before_any_call(milvus_client):
    with pytest.raises(ConfigurationError, match="try 'docs_2024'"):
        create_collection(milvus_client, "docs-2024", default_spec(4))


def test_resolve_milvus_refuses_unknown_schemes_naming_the_forms():
    with pytest.raises(ConfigurationError) as info:
        resolve_milvus("ftp://foo", env={})
    assert str(info.value).startswith("Milvus URI 'ftp://foo' scheme 'ftp' is not one Milvus speaks; accepted: "
                                      "a Milvus Lite file path ending in .db")
    assert resolve_milvus(None, env={"CONVRAG_MILVUS_URI": "http://h:19530"}).uri == "http://h:19530"
    assert validate_uri("C:/data/x.db") == "C:/data/x.db"
