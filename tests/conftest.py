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
import time
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


def _once_per_run(shared: Path, what: str, argv: List[str], started: List[subprocess.Popen]) -> None:
    """Run ``argv`` (a child process) once per test run, under a lock in ``shared`` that the workers share: the first
    caller runs it, the others wait on the lock, then find it done. The child is appended to ``started`` (so that the
    session can stop it). A failed run leaves no mark: the next caller runs it again and reports the failure."""
    shared.mkdir(exist_ok=True)
    with open(shared / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (shared / "built").exists():
            return
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVRAG_", "OPENAI_"))}
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise AssertionError(f"{what} exited {proc.returncode}: {err[-2000:]}")
        (shared / "built").touch()


def _build_repository_docs(shared: Path, started: List[subprocess.Popen]) -> None:
    """``convrag ingest docs/`` into ``shared/docs.db``, once per run."""
    _once_per_run(shared, "convrag ingest docs/", [sys.executable, "-m", "llama_index_convrag.cli", "ingest",
                                                   str(REPOSITORY_DOCS), "--uri", str(shared / "docs.db"), "--quiet"],
                  started)


#: Scores a tiny run with every metric ``evaluate_run`` offers (a query with nothing retrieved included): numba compiles
#: ranx's kernels and writes them to its cache beside the package.
RANX_WARM_UP = """
from llama_index_convrag.evaluation import evaluate_run
evaluate_run({"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}}, {"q1": {"d1": 2, "d2": 1}, "q2": {"d9": 1}}, ks=(1, 3))
"""


def _compile_ranx(shared: Path, started: List[subprocess.Popen]) -> None:
    """ranx's kernels compiled into numba's cache, once per run."""
    _once_per_run(shared, "the ranx warm-up", [sys.executable, "-c", RANX_WARM_UP], started)


#: fixture name -> (its folder under the run's shared folder, what builds it): built once per run, started in the
#: background at a worker's first test when the run has tests that ask the fixture
RUN_ONCE = {"repository_docs": ("repository_docs", _build_repository_docs),
            "ranx_compiled": ("ranx", _compile_ranx)}


@pytest.fixture(scope="session", autouse=True)
def _run_once_early(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Start what :data:`RUN_ONCE` builds in the background at a worker's first test when the run has tests that ask
    it: the build then overlaps other files instead of keeping the workers of those tests waiting. Stopped at the end
    of the session if still running."""
    started: List[subprocess.Popen] = []
    asked = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    for name, (folder, build) in RUN_ONCE.items():
        if name in asked:
            shared = run_shared_folder(tmp_path_factory) / folder
            threading.Thread(target=_build_quietly, args=(build, shared, started), daemon=True).start()
    yield
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()


def _build_quietly(build: Any, shared: Path, started: List[subprocess.Popen]) -> None:
    try:
        build(shared, started)
    except Exception:  # noqa: BLE001 - the fixture builds again and reports why
        pass


@pytest.fixture(scope="session")
def repository_docs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(this checkout's ``docs/``, a Milvus Lite file holding it): for the tests that ask it questions.

    ``convrag ingest docs/`` runs once per test run, in a child process (a Milvus Lite file is held by the process
    that opened it until that process ends), under a lock the workers share (started early by ``_run_once_early``);
    each worker asks a copy of the file.
    """
    shared = run_shared_folder(tmp_path_factory) / "repository_docs"
    _build_repository_docs(shared, [])
    uri = tmp_path_factory.mktemp("repository_docs") / "docs.db"
    shutil.copyfile(shared / "docs.db", uri)
    return REPOSITORY_DOCS, str(uri)


#: How long a test waits for ranx's kernels being compiled by another process before it goes on without them (and
#: compiles what it needs itself, as without the warm-up); the tests that ask ``ranx_compiled`` get this much more
#: than the run's timeout, which counts the wait (:func:`pytest_collection_modifyitems`).
RANX_WAIT_S = 150.0


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """The tests that may wait for ranx's kernels (``ranx_compiled``): the ini timeout plus :data:`RANX_WAIT_S`."""
    timeout = float(config.getini("timeout") or 0)
    for item in items:
        if timeout and "ranx_compiled" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(timeout + RANX_WAIT_S))


@pytest.fixture(scope="session")
def ranx_compiled(tmp_path_factory: pytest.TempPathFactory) -> None:
    """For the tests that score runs with ranx (in this process, a subprocess or a kernel): numba compiles ranx's
    kernels on first use (about 90 CPU-s, then cached beside the package, where a fresh environment has none), and
    every process that starts before the cache is written compiles them again. The first worker compiles them once for
    the run, in a child process started early (``_run_once_early``); these tests wait for it (at most
    :data:`RANX_WAIT_S`), then load the cache."""
    shared = run_shared_folder(tmp_path_factory) / "ranx"
    shared.mkdir(exist_ok=True)
    deadline = time.monotonic() + RANX_WAIT_S
    while not (shared / "built").exists() and time.monotonic() < deadline:
        with open(shared / "build.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # being compiled
                time.sleep(0.5)
                continue
        _compile_ranx(shared, [])  # no one compiling (the early start failed): compile here, or find it done
        return


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
