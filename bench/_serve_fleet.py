"""The two-worker setup of ``bench/serve_load.py``: a PostgreSQL server, a Milvus server process (milvus-lite 2.5.1
serving gRPC on a TCP port) and two one-worker uvicorn processes over both, each under a fixed worker name and port;
a :class:`Killer` that ``kill -9``s a worker mid-run and restarts it at once on the same port under the same name (as
a supervisor restarting ``convrag serve`` does: the restarted worker frees its earlier claims when it starts).

Two processes on two ports hold exactly what ``--workers 2`` holds (nothing of their own), and the load clients
choose between them as a load balancer would (``serve_load.Balancer``), which the kernel's choice between the workers
of one port would not let a bench control.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serve.conftest import Server  # noqa: E402
from tests.serve.server_app import DOCS  # noqa: E402

#: the workers' lease (seconds; convrag serve's default): a killed worker's claims lapse after it; a restart under the
#: same name frees them at once. (3 s lapsed under load: a worker's renewal waits behind its busy loop.)
LEASE_S = 10.0


@dataclass
class KillLog:
    """What the killer did: one entry per kill -9 (the worker, its pid, the exit status seen, the restart's time)."""

    kills: List[Dict[str, Any]] = field(default_factory=list)


class Fleet:
    """PostgreSQL + a Milvus server process + two uvicorn workers (``a``, ``b``); :meth:`stop` ends every process."""

    def __init__(self, work: Path, env: Dict[str, str]) -> None:
        self.work, self.env = work, env
        self.pg: Any = None
        self.milvus: Any = None
        self.workers: Dict[str, Server] = {}
        self.store_url = ""
        self.milvus_uri = ""

    def start(self) -> "Fleet":
        from llama_index_convrag.embeddings import LocalMiniLMEmbedding
        from llama_index_convrag.ingest import ingest
        from llama_index_convrag.milvus.client import connect_milvus, resolve_milvus
        from llama_index_convrag.milvus.schema import default_dense_index
        from llama_index_convrag.testing.milvus_server import MilvusLiteServer
        from tests.storage.conversation.conftest import PostgresServer

        try:
            self.pg = PostgresServer().start()
            self.store_url = self.pg.new_database()
            self.milvus = MilvusLiteServer(self.work / "milvus").start()
            self.milvus_uri = self.milvus.uri
            docs = self.work / "docs"
            docs.mkdir()
            for name, text in DOCS.items():
                (docs / name).write_text(text)
            target = resolve_milvus(self.milvus_uri)
            client = connect_milvus(target)
            try:
                ingest([docs], collection_name="serve_docs", embed_model=LocalMiniLMEmbedding(), client=client,
                       target=target, dense_index=default_dense_index(is_lite=True))  # Lite's engine: no HNSW
            finally:
                client.close()  # an idle channel's keep-alive pings would draw the server's GOAWAY
            for name in ("a", "b"):
                (self.work / name).mkdir()
                self.workers[name] = self._server(name)
            for srv in self.workers.values():
                srv.wait(300)
        except BaseException:
            self.stop()
            raise
        return self

    def _server(self, name: str, port: Optional[int] = None) -> Server:
        env = {**self.env, "CONVRAG_TEST_MILVUS": self.milvus_uri, "CONVRAG_TEST_INGEST": "0",
               "CONVRAG_TEST_STORE": self.store_url, "CONVRAG_TEST_WORKER_NAME": f"bench-{name}",
               "CONVRAG_TEST_LEASE_S": repr(LEASE_S)}
        return Server(self.work / name, env=env, port=port)

    @property
    def urls(self) -> List[str]:
        return [srv.url for srv in self.workers.values()]

    def kill_and_restart(self, name: str) -> Dict[str, Any]:
        """``kill -9`` worker ``name`` (no cleanup runs), then start it again on its port under its name; returns
        when the new process answers /v1/health."""
        old = self.workers[name]
        pid = old.proc.pid
        os.kill(pid, signal.SIGKILL)
        status = old.proc.wait()
        killed_at = time.monotonic()
        self.workers[name] = self._server(name, port=old.port)
        self.workers[name].wait(300)
        return {"worker": name, "pid": pid, "returncode": status, "restart_s": time.monotonic() - killed_at,
                "new_pid": self.workers[name].proc.pid}

    def stop(self) -> None:
        for srv in self.workers.values():
            if srv.proc.poll() is None:
                srv.stop()
        if self.milvus is not None:
            self.milvus.stop()
        if self.pg is not None:
            self.pg.stop()


def answered_since(store_url: str, since: float) -> int:
    """Answers completed in the store since ``since`` (epoch seconds): the run's progress, read by the killer."""
    import sqlalchemy as sa

    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(
                "SELECT count(*) FROM convrag_messages WHERE role = 'assistant' AND status = 'complete' "
                "AND created_at >= :t"), {"t": since}).scalar_one())
    finally:
        engine.dispose()


class Killer(threading.Thread):
    """During one run: ``kill -9`` a worker (alternating ``a``, ``b``) each time the answers completed since the run
    began reach the next of ``at`` (counts), and restart it; stops at :meth:`finish`."""

    def __init__(self, fleet: Fleet, since: float, at: List[int], first: str = "a") -> None:
        super().__init__(daemon=True)
        self.fleet, self.since, self.at = fleet, since, list(at)
        self.order = [first, "b" if first == "a" else "a"]
        self.log = KillLog()
        self._done = threading.Event()
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            for i, count in enumerate(self.at):
                while answered_since(self.fleet.store_url, self.since) < count:
                    if self._done.wait(0.1):
                        return
                self.log.kills.append(self.fleet.kill_and_restart(self.order[i % 2]))
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.error = exc

    def finish(self) -> KillLog:
        self._done.set()
        self.join()
        if self.error is not None:
            raise self.error
        return self.log
