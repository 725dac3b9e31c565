import pytest
from pymilvus import DataType

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.client import (
    LITE_GRPC_OPTIONS,
    MilvusConnectionError,
    MilvusTarget,
    client_kwargs,
    connect_milvus,
    connect_milvus_async,
    reconnect_milvus,
    resolve_milvus,
    server_log_path,
)


def test_same_target_reuses_client(milvus_target, milvus_client):
    assert connect_milvus(milvus_target) is milvus_client


def test_missing_folder_names_the_uri():
    with pytest.raises(MilvusConnectionError, match="/no/such/dir/x.db"):
        connect_milvus(MilvusTarget("/no/such/dir/x.db"))


def test_unreachable_server_names_the_uri():
    with pytest.raises(MilvusConnectionError, match=r"http://127\.0\.0\.1:9"):
        connect_milvus(MilvusTarget("http://127.0.0.1:9"), timeout=1)


def test_reconnect_names_the_server_it_cannot_reach_and_refuses_a_lite_file(milvus_target):
    with pytest.raises(MilvusConnectionError, match=r"cannot connect to Milvus at 'http://127\.0\.0\.1:9'"):
        reconnect_milvus(MilvusTarget("http://127.0.0.1:9"), timeout=1)
    with pytest.raises(ConfigurationError, match=r"needs a Milvus server URI \(http://HOST:PORT\), got the Milvus Lite "
                                                 r"file '.*tests\.db'"):
        reconnect_milvus(milvus_target)


def test_collection_fixture_gives_a_real_collection(milvus_client, collection_name):
    schema = milvus_client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    index = milvus_client.prepare_index_params()
    index.add_index("v", index_type="FLAT", metric_type="IP")
    milvus_client.create_collection(collection_name, schema=schema, index_params=index)
    milvus_client.insert(collection_name, [{"id": 1, "v": [1.0, 0.0]}, {"id": 2, "v": [0.0, 1.0]}])
    hits = milvus_client.search(collection_name, data=[[0.9, 0.1]], limit=1, anns_field="v")
    assert hits[0][0]["id"] == 1


def test_lite_clients_do_not_ping_while_idle():
    lite = client_kwargs(MilvusTarget("/tmp/x.db"), 5.0)
    assert lite == {"uri": "/tmp/x.db", "timeout": 5.0, "grpc_options": LITE_GRPC_OPTIONS}
    assert LITE_GRPC_OPTIONS["grpc.keepalive_permit_without_calls"] is False
    server = client_kwargs(MilvusTarget("http://h:19530", token="t"), 5.0)
    assert server == {"uri": "http://h:19530", "timeout": 5.0, "token": "t"}


async def test_async_client_on_lite_file(milvus_target, milvus_client, collection_name):
    milvus_client.create_collection(collection_name, dimension=2)
    client = connect_milvus_async(milvus_target)
    assert collection_name in await client.list_collections()
    await client.close()


def test_lite_server_log_goes_to_a_file_not_stderr(tmp_path, capfd):
    target = MilvusTarget(str(tmp_path / "quiet.db"))
    client = connect_milvus(target)
    client.create_collection("c", dimension=2)
    client.insert("c", [{"id": 1, "vector": [0.1, 0.2]}])
    client.flush("c")
    assert server_log_path(target) == tmp_path / "quiet.db.server.log"
    assert server_log_path(target).exists()
    assert "tantivy" not in capfd.readouterr().err


def test_milvus_resolution_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_milvus(env={}).uri == str(tmp_path / "convrag.db")
    assert resolve_milvus(env={"CONVRAG_MILVUS_URI": "http://h:19530"}).uri == "http://h:19530"
    target = resolve_milvus("x.db", token="t", env={"CONVRAG_MILVUS_URI": "http://h:19530"})
    assert (target.uri, target.token, target.is_lite) == ("x.db", "t", True)
    assert resolve_milvus(env={"CONVRAG_MILVUS_URI": "https://h"}).is_lite is False


def test_blank_milvus_uri_is_rejected():
    with pytest.raises(ValueError, match="Milvus URI '  ' is empty; accepted: "):
        resolve_milvus("  ", env={})
