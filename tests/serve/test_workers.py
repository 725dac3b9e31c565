"""Two server processes over one PostgreSQL store and one Milvus server (milvus-lite 2.5.1 serving gRPC on a TCP
port): one conversation is answered by both, turn by turn, and a turn in flight on one is a 409 on the other.

Each process is a one-worker uvicorn on its own port, and the client alternates between them: which worker of a
``--workers N`` server accepts a connection is the kernel's choice, so a test of statelessness that relied on it
would not be deterministic; two processes on two ports hold exactly what N workers hold (nothing of their own)."""

from __future__ import annotations

import threading
from typing import Dict, Iterator, Tuple

import httpx
import pytest

from llama_index_convrag.embeddings import LocalMiniLMEmbedding
from llama_index_convrag.ingest import ingest
from llama_index_convrag.milvus.client import connect_milvus, resolve_milvus
from llama_index_convrag.milvus.schema import default_dense_index
from llama_index_convrag.testing.milvus_server import MilvusLiteServer
from tests.serve.conftest import Server
from tests.serve.server_app import DOCS
from tests.storage.conversation.conftest import PostgresServer, postgres_server  # noqa: F401 - fixture

@pytest.fixture(scope="module")
def milvus_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Milvus server process: milvus-lite 2.5.1's own gRPC server on a 127.0.0.1 port (stopped with every process
    it started)."""
    with MilvusLiteServer(tmp_path_factory.mktemp("milvus")) as server:
        yield server.uri


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer,  # noqa: F811
                milvus_uri: str) -> Iterator[Tuple[Server, Server]]:
    root = tmp_path_factory.mktemp("workers")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    target = resolve_milvus(milvus_uri)
    ingest([docs], collection_name="serve_docs", embed_model=LocalMiniLMEmbedding(), client=connect_milvus(target),
           target=target, dense_index=default_dense_index(is_lite=True))  # this server is Lite's engine: no HNSW
    env = {"CONVRAG_TEST_MILVUS": milvus_uri, "CONVRAG_TEST_INGEST": "0",
           "CONVRAG_TEST_STORE": postgres_server.new_database()}
    servers = []
    try:
        for name in ("a", "b"):
            (root / name).mkdir()
            servers.append(Server(root / name, env=env))
        for srv in servers:
            srv.wait(180)
        yield servers[0], servers[1]
    finally:
        for srv in servers:
            srv.stop()


def test_one_conversation_served_by_both_workers(two_workers: Tuple[Server, Server]) -> None:
    a, b = two_workers
    with httpx.Client(base_url=a.url, timeout=60) as c:
        cid = c.post("/v1/conversations", json={"title": "shared"}).json()["id"]
    pids = []
    for turn in range(4):  # a, b, a, b: each turn reads the history the other process stored
        with httpx.Client(base_url=(a, b)[turn % 2].url, timeout=60) as c:
            r = c.post(f"/v1/conversations/{cid}/messages", json={"content": f"turn {turn}: BM25?", "stream": False})
        assert r.status_code == 200 and r.json()["status"] == "complete", r.text
        pids.append(r.headers["X-Worker-Pid"])
    assert pids[0] == pids[2] != pids[1] == pids[3]
    for srv in (a, b):
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            messages = c.get(f"/v1/conversations/{cid}").json()["messages"]
        assert [m["content"] for m in messages if m["role"] == "user"] == [f"turn {i}: BM25?" for i in range(4)]
        assert [m["status"] for m in messages] == ["complete"] * 8


def test_turn_in_flight_on_one_worker_is_409_on_the_other(two_workers: Tuple[Server, Server]) -> None:
    a, b = two_workers
    with httpx.Client(base_url=a.url, timeout=60) as c:
        cid = c.post("/v1/conversations", json={}).json()["id"]
    streaming = threading.Event()
    owner: Dict[str, str] = {}

    def first() -> None:
        with httpx.Client(base_url=a.url, timeout=60) as c1:
            with c1.stream("POST", f"/v1/conversations/{cid}/messages", json={"content": "What is fusion?"}) as r:
                owner["pid"] = r.headers["X-Worker-Pid"]
                for line in r.iter_lines():
                    if line.startswith("event: delta"):
                        streaming.set()

    t = threading.Thread(target=first)
    t.start()
    try:
        assert streaming.wait(60)
        with httpx.Client(base_url=b.url, timeout=60) as other:
            r = other.post(f"/v1/conversations/{cid}/messages", json={"content": "again"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "turn_in_flight", r.text
        assert r.headers["X-Worker-Pid"] != owner["pid"]
    finally:
        t.join()
