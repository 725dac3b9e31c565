"""A real ``uvicorn`` process serving ``tests/serve/server_app.py`` on a free 127.0.0.1 port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Optional

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, workdir: Path, env: Optional[dict] = None, workers: int = 1,
                 port: Optional[int] = None) -> None:
        """``port``: a given one (a restart on the same address), else a free one."""
        self.workdir, self.port = workdir, free_port() if port is None else port
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"server-{self.port}.log"
        full_env = {**os.environ, "CONVRAG_TEST_DIR": str(workdir), "CONVRAG_TEST_TOKEN_DELAY": "0.02",
                    "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "tests.serve.server_app:create", "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", str(workers), "--log-level", "warning",
             "--timeout-keep-alive", "120"],  # an idle pooled connection is not closed under a client's feet
            cwd=ROOT, env=full_env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)

    def wait(self, timeout: float = 120.0) -> "Server":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/v1/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.3)
        raise RuntimeError(f"server not up in {timeout} s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


#: the session server's browser origin allowed by CORS, and its keep-alive comment interval (short: the tests see
#: comments in their streams)
CORS_ORIGIN = "http://app.example"
PING_S = "0.2"


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("serve"), env={"CONVRAG_TEST_CORS": CORS_ORIGIN,
                                                         "CONVRAG_TEST_PING_S": PING_S}).wait()
    yield srv
    srv.stop()
