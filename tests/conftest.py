"""Shared fixtures: network guard, Milvus Lite, the local embedding model, the local OpenAI-compatible server."""

from __future__ import annotations

import fcntl
import ipaddress
import itertools
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, List

import numpy as np
import pytest

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus
from llama_index_convrag.testing import LocalOpenAIServer
from llama_index_convrag.testing.milvus_server import use_lite_grpc_options

# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): each xdist worker and each
# `convrag` subprocess a test starts otherwise recompiles the package and re-rewrites every test module (collection
# 32 against 19 s of CPU a process, measured with `pytest --collect-only` on this checkout).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

pytest_plugins = ["tests.faults.table",  # the fault table, printed by the process that prints the summary
                  "tests.schedule"]  # the longest test files start first

def _find_shared_data() -> Path:
    """``shared/data`` in the first parent folder of the checkout that has one."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "shared" / "data").is_dir():
            return parent / "shared" / "data"
    return here.parents[2] / "shared" / "data"


SHARED_DATA = _find_shared_data()


class NetworkBlocked(OSError):
    """A test tried to reach a non-loopback address."""


def is_loopback(address: Any) -> bool:
    """True for Unix sockets, loopback IPs and 'localhost'."""
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_getaddrinfo = socket.getaddrinfo


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode() if isinstance(host, bytes) else host
    if name is not None and not is_loopback((name, 0)):
        raise NetworkBlocked(f"test tried to resolve non-loopback host {name!r}")
    return _real_getaddrinfo(host, *args, **kwargs)
_real_connect_ex = socket.socket.connect_ex


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not is_loopback(address):
        raise NetworkBlocked(f"test tried to reach non-loopback address {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if not is_loopback(address):
        raise NetworkBlocked(f"test tried to reach non-loopback address {address!r}")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail any test that opens a socket to anything but loopback; forbid hub downloads."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CONVRAG_LLM_MODEL", "CONVRAG_EMBED_MODEL",
                 "CONVRAG_MILVUS_URI", "CONVRAG_MILVUS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.fixture(scope="session", autouse=True)
def lite_grpc_options() -> Iterator[None]:
    """Give third-party clients in tests (LlamaIndex's MilvusVectorStore) and clients of a ``MilvusLiteServer`` the
    keepalive options our own clients of a Lite file use: every Milvus here runs Lite's engine, which drops
    connections that ping while idle."""
    undo = use_lite_grpc_options()
    yield
    undo()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the checkout (read-only evaluation data)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def milvus_target(tmp_path_factory: pytest.TempPathFactory) -> MilvusTarget:
    return MilvusTarget(uri=str(tmp_path_factory.mktemp("milvus") / "tests.db"))


@pytest.fixture(scope="session")
def milvus_client(milvus_target: MilvusTarget) -> Any:
    """One real Milvus Lite database for the whole session."""
    return connect_milvus(milvus_target)


_counter = itertools.count()


@pytest.fixture
def collection_name(request: pytest.FixtureRequest, milvus_client: Any) -> Iterator[str]:
    """A unique collection name for this test; the collection is dropped afterwards."""
    stem = re.sub(r"[^0-9a-zA-Z_]", "_", request.node.name)[:40]
    name = f"t{next(_counter)}_{stem}"
    yield name
    if milvus_client.has_collection(name):
        milvus_client.drop_collection(name)


def run_shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every process of this test run shares: the run's base temp folder, above the workers' own under
    pytest-xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


REPOSITORY_DOCS = Path(__file__).resolve().parents[1] / "docs"


def _build_repository_docs(shared: Path, started: List[subprocess.Popen]) -> None:
    """``convrag ingest docs/`` into ``shared/docs.db`` unless built, under the lock the workers share; the child is
    appended to ``started`` (so that the session can stop it). A failed build leaves no mark: the next caller builds
    again and reports the failure."""
    shared.mkdir(exist_ok=True)
    with open(shared / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker builds; the others wait here, then find it built
        if (shared / "built").exists():
            return
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVRAG_", "OPENAI_"))}
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        proc = subprocess.Popen([sys.executable, "-m", "llama_index_convrag.cli", "ingest", str(REPOSITORY_DOCS),
                                 "--uri", str(shared / "docs.db"), "--quiet"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        started.append(proc)
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise AssertionError(f"convrag ingest docs/ exited {proc.returncode}: {err[-2000:]}")
        (shared / "built").touch()


@pytest.fixture(scope="session", autouse=True)
def _repository_docs_early(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Start building ``repository_docs`` in the background at a worker's first test when the run has tests that
    ask it: the build (about 80 CPU-s of embedding) then overlaps other files instead of keeping the workers of
    those tests waiting. Stopped at the end of the session if still running."""
    started: List[subprocess.Popen] = []
    if any("repository_docs" in getattr(item, "fixturenames", ()) for item in request.session.items):
        shared = run_shared_folder(tmp_path_factory) / "repository_docs"
        threading.Thread(target=_build_repository_docs_quietly, args=(shared, started), daemon=True).start()
    yield
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()


def _build_repository_docs_quietly(shared: Path, started: List[subprocess.Popen]) -> None:
    try:
        _build_repository_docs(shared, started)
    except Exception:  # noqa: BLE001 - the fixture builds again and reports why
        pass


@pytest.fixture(scope="session")
def repository_docs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(this checkout's ``docs/``, a Milvus Lite file holding it): for the tests that ask it questions.

    ``convrag ingest docs/`` runs once per test run, in a child process (a Milvus Lite file is held by the process
    that opened it until that process ends), under a lock the workers share (started early by
    ``_repository_docs_early``); each worker asks a copy of the file.
    """
    shared = run_shared_folder(tmp_path_factory) / "repository_docs"
    _build_repository_docs(shared, [])
    uri = tmp_path_factory.mktemp("repository_docs") / "docs.db"
    shutil.copyfile(shared / "docs.db", uri)
    return REPOSITORY_DOCS, str(uri)


@pytest.fixture(scope="session")
def embed_model() -> LocalMiniLMEmbedding:
    """The real local embedding model, loaded once."""
    model = LocalMiniLMEmbedding()
    model.warm_up()
    return model


@pytest.fixture(scope="session")
def _openai_server_session(embed_model: LocalMiniLMEmbedding) -> Iterator[LocalOpenAIServer]:
    def embed(texts: List[str]) -> List[List[float]]:
        return embed_model.embed(texts).tolist()

    def rerank(query: str, docs: List[str]) -> List[float]:
        vectors = embed_model.embed([query, *docs])
        return (vectors[1:] @ vectors[0]).tolist()

    server = LocalOpenAIServer(embed_fn=embed, rerank_fn=rerank).start()
    yield server
    server.stop()


@pytest.fixture
def openai_server(_openai_server_session: LocalOpenAIServer) -> Iterator[LocalOpenAIServer]:
    """The local OpenAI-compatible server, with responders and records reset for each test."""
    from llama_index_convrag.testing.openai_server import echo_chat

    server = _openai_server_session
    server.clear()
    server.chat_responder = echo_chat
    yield server
    server.clear()
    server.chat_responder = echo_chat


def cosine(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
