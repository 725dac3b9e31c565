"""ingest/distributed.py on a local Ray cluster of one machine (2 CPUs) against a real Milvus server process."""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import grpc
import pytest
from llama_index.core.node_parser import SentenceSplitter

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.errors import ConfigurationError, MilvusConnectionError
from llama_index_convrag.ingest.distributed import (DISTRIBUTED_EXTRA_HINT, WorkerDeadlines, _Job, import_ray,
                                                    ingest_distributed, milvus_call, read_files)
from llama_index_convrag.ingest.pipeline import ingest
from llama_index_convrag.ingest.read_stage import pickle_splitter
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus
from llama_index_convrag.milvus.schema import CollectionSpec, default_dense_index
from llama_index_convrag.testing.milvus_server import MilvusLiteServer
from tests.conftest import cosine

OPTIONS = {"chunk_size": 48, "chunk_overlap": 8, "batch_size": 6,
           "dense_index": default_dense_index(is_lite=True)}  # milvus-lite's engine serves: FLAT, no HNSW


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A local cluster whose workers run at the test run's own priority: Ray starts workers at niceness 15, and on a
    2-core machine busy with the other test files such a worker got under 1% of a core, so the first task (imports,
    then its first Milvus query) ran past the test's timeout (pid of a worker: ``ps -o ni``)."""
    ray = pytest.importorskip("ray", reason=f"the Ray engine's tests need {DISTRIBUTED_EXTRA_HINT}")
    for attempt in (1, 2):  # Ray waits a fixed 30 s for its raylet to register; at load 18 it once took longer
        try:
            ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="ERROR",
                     log_to_driver=False, _system_config={"worker_niceness": 0})
            break
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this
            ray.shutdown()
            if attempt == 2 or "timed out during startup" not in str(exc):
                raise
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusLiteServer]:
    with MilvusLiteServer(tmp_path_factory.mktemp("milvus_server")) as server:
        yield server


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ray_corpus") / "docs"
    (root / "sub").mkdir(parents=True)
    for i in range(9):
        text = " ".join(f"Document {i} sentence {j} is about topic {(i * j) % 5} in several words." for j in range(i + 1))
        (root / ("sub" if i % 2 else ".") / f"d{i}.txt").write_text(text)
    (root / "notes.md").write_text("# Notes\n\nMilvus supports BM25 full text search.")
    (root / "photo.png").write_bytes(b"\x89PNG")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4")
    return root


def stored(client: Any, name: str) -> dict:
    rows = client.query(name, filter='id != ""', output_fields=["*"], limit=16384)
    return {r["id"]: {k: v for k, v in r.items() if k != "sparse_embedding"} for r in rows}


def test_the_ray_engine_stores_the_rows_of_the_single_process_path_and_skips_unchanged_files(
        ray_cluster, milvus_server, corpus, embed_model):
    target = MilvusTarget(uri=milvus_server.uri)
    client = connect_milvus(target)
    ray_report = ingest_distributed([corpus], collection_name="by_ray", target=target,
                                    embed_factory=LocalMiniLMEmbedding, workers=2, **OPTIONS)
    one_report = ingest([corpus], collection_name="by_one", target=target, client=client, embed_model=embed_model,
                        **OPTIONS)
    for key in ("added", "unsupported", "chunks"):
        assert getattr(ray_report, key) == getattr(one_report, key), key
    assert [Path(p).name for p, _ in ray_report.failed] == ["broken.pdf"] and len(ray_report.added) == 10
    by_ray, by_one = stored(client, "by_ray"), stored(client, "by_one")
    assert sorted(by_ray) == sorted(by_one) and len(by_ray) == ray_report.chunks > 10
    for key, row in by_ray.items():
        vector, other = row.pop("embedding"), by_one[key].pop("embedding")
        assert row == by_one[key]  # id, document id, text, metadata, LlamaIndex's node fields
        assert cosine(vector, other) > 0.9999  # the same model in other processes, batched differently

    again = ingest_distributed([corpus], collection_name="by_ray", target=target, embed_factory=LocalMiniLMEmbedding,
                               workers=2, **OPTIONS)
    assert (again.added, again.updated, again.chunks, len(again.unchanged)) == ([], [], 0, 10)
    # the engines take turns: what the single-process path stored is unchanged for the Ray engine
    turn = ingest_distributed([corpus], collection_name="by_one", target=target, embed_factory=LocalMiniLMEmbedding,
                              workers=1, **OPTIONS)
    assert (turn.added, turn.chunks, len(turn.unchanged)) == ([], 0, 10)


def test_a_changed_file_is_replaced_and_vanished_ones_are_removed_when_asked(ray_cluster, milvus_server, corpus,
                                                                              tmp_path):
    target = MilvusTarget(uri=milvus_server.uri)
    client = connect_milvus(target)
    root = tmp_path / "docs"
    root.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (root / name).write_text(f"File {name} talks about zebras and their stripes in detail. " * 12)
    first = ingest_distributed([root], collection_name="changes", target=target, embed_factory=LocalMiniLMEmbedding,
                               workers=2, **OPTIONS)
    assert len(first.added) == 3
    (root / "a.txt").write_text("Now a single sentence about giraffes.")
    (root / "c.txt").unlink()
    second = ingest_distributed([root], collection_name="changes", target=target, embed_factory=LocalMiniLMEmbedding,
                                workers=2, delete_missing=True, **OPTIONS)
    assert [Path(p).name for p in second.updated] == ["a.txt"] and [Path(p).name for p in second.unchanged] == \
        ["b.txt"] and [Path(p).name for p in second.deleted] == ["c.txt"] and second.chunks == 1
    rows = client.query("changes", filter='id != ""', output_fields=["doc_id", "text", "metadata"])
    a_rows = [r for r in rows if r["doc_id"].endswith("/a.txt")]
    assert [r["text"] for r in a_rows] == ["Now a single sentence about giraffes."]
    assert sorted({Path(r["doc_id"]).name for r in rows}) == ["a.txt", "b.txt"]
    for doc_id in {r["doc_id"] for r in rows}:
        mine = [r for r in rows if r["doc_id"] == doc_id]
        assert len(mine) == mine[0]["metadata"]["chunk_count"]


def test_a_milvus_lite_file_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ConfigurationError, match=r"needs a Milvus server URI \(http://HOST:PORT\), got the Milvus "
                                                 r"Lite file '.*x\.db'"):
        ingest_distributed([tmp_path], collection_name="c", target=MilvusTarget(uri=str(tmp_path / "x.db")),
                           embed_factory=LocalMiniLMEmbedding)
    with pytest.raises(ConfigurationError, match=r"unknown option\(s\) \['chunksize'\] for the Ray engine"):
        ingest_distributed([tmp_path], collection_name="c", target=MilvusTarget(uri="http://127.0.0.1:1"),
                           embed_factory=LocalMiniLMEmbedding, chunksize=3)


def test_ray_workers_run_at_the_priority_of_the_tests(ray_cluster):
    @ray_cluster.remote(num_cpus=0.25)
    def niceness() -> int:
        return os.nice(0)

    assert ray_cluster.get(niceness.remote(), timeout=120) == os.nice(0)


def _job(uri: str, deadlines: WorkerDeadlines) -> _Job:
    """What a task of a run into collection ``stuck`` of the server at ``uri`` receives."""
    return _Job(MilvusTarget(uri=uri), "stuck", CollectionSpec(), pickle_splitter(SentenceSplitter()),
                LocalMiniLMEmbedding, "k", deadlines)


def test_a_server_that_never_answers_fails_the_read_stage_within_its_deadlines_naming_the_call(tmp_path):
    """A listener that accepts connections and never answers, as a stuck server does: connecting runs out of time, is
    tried once more on a new connection, then the error names the server, the call and the deadlines."""
    (tmp_path / "a.txt").write_text("one sentence")
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)
        uri = f"http://127.0.0.1:{hole.getsockname()[1]}"
        start = time.monotonic()
        with pytest.raises(MilvusConnectionError, match=rf"Milvus at '{re.escape(uri)}' did not answer the "
                           r"stored-hash query on collection 'stuck' within 2 s \(connecting within 1 s\) in 2 "
                           r"attempt\(s\), each retry on a new connection; last error: cannot connect"):
            read_files({"path": [str(tmp_path / "a.txt")]}, _job(uri, WorkerDeadlines(connect_s=1, call_s=2)))
        assert time.monotonic() - start < 30  # two connection deadlines of 1 s, and the scheduler's slack


class _DeadlineExceeded(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED


def test_a_call_past_its_deadline_is_made_again_on_a_new_connection_and_other_errors_are_not(milvus_server):
    job = _job(milvus_server.uri, WorkerDeadlines(call_s=5))
    calls = []

    def late_once(client, timeout):
        calls.append((client, timeout))
        if len(calls) == 1:
            raise _DeadlineExceeded()
        return client.has_collection("stuck", timeout=timeout)

    assert milvus_call(job, "has", late_once) is False
    assert calls[0][0] is not calls[1][0] and [t for _, t in calls] == [5, 5]  # a new client the second time
    assert connect_milvus(job.target) is calls[1][0]  # which the process keeps
    with pytest.raises(ValueError, match="not a deadline"):
        milvus_call(job, "x", lambda client, timeout: (_ for _ in ()).throw(ValueError("not a deadline")))
    with pytest.raises(MilvusConnectionError, match=r"did not answer always late on collection 'stuck' within 5 s"):
        milvus_call(job, "always late", lambda client, timeout: (_ for _ in ()).throw(_DeadlineExceeded()))


def test_worker_deadlines_refuse_bad_values():
    with pytest.raises(ConfigurationError, match=r"connect_s and call_s must be > 0 seconds, got 0 and 60"):
        WorkerDeadlines(connect_s=0)
    with pytest.raises(ConfigurationError, match=r"attempts must be an integer >= 1, got 0"):
        WorkerDeadlines(attempts=0)


def test_without_ray_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: importing it raises ImportError
    with pytest.raises(ConfigurationError, match=r'install it with pip install "llama-index-convrag\[distributed\]"'):
        import_ray()


def test_convrag_ingest_engine_ray(ray_cluster, milvus_server, corpus, tmp_path, capsys):
    """The CLI entry: the engine's report as JSON; a Lite file is a usage error naming the server form."""
    import json

    from llama_index_convrag.cli import main

    code = main(["ingest", str(corpus), "--engine", "ray", "--workers", "1", "--uri", milvus_server.uri,
                 "--collection", "by_ray", "--chunk-size", "48", "--chunk-overlap", "8", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 3  # broken.pdf failed: the others are stored, the exit code says not all were
    assert len(report["unchanged"]) == 10 and [Path(f["path"]).name for f in report["failed"]] == ["broken.pdf"]
    code = main(["ingest", str(corpus), "--engine", "ray", "--uri", str(tmp_path / "x.db")])
    assert code == 2 and "needs a Milvus server URI (http://HOST:PORT)" in capsys.readouterr().err
    assert not (tmp_path / "x.db").exists()
