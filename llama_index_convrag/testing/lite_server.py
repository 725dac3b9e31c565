"""A Milvus Lite 3.x server process (``milvus-lite server --data-dir D --port P``) for tests and benches.

Milvus Lite 3.x is a different version of the package this project pins (2.5.1, embedded), so it lives in its own
virtual environment; :data:`ENV_VENV` (default ``/work/venv-lite3``) names it. Create one with::

    python3 -m venv /work/venv-lite3 && /work/venv-lite3/bin/pip install "milvus-lite>=3" pymilvus

(milvus-lite 3.x imports pymilvus's gRPC stubs but does not declare it.) The server speaks gRPC on ``127.0.0.1:PORT``; clients of this package reach it with ``http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, List, Optional

ENV_VENV = "CONVRAG_LITE3_VENV"
DEFAULT_VENV = "/work/venv-lite3"
SETUP_HINT = (f'python3 -m venv {DEFAULT_VENV} && {DEFAULT_VENV}/bin/pip install "milvus-lite>=3" pymilvus '
              f"(or point ${ENV_VENV} at a virtual environment that has it)")


def lite3_executable(venv: Optional[str] = None) -> Optional[Path]:
    """The ``milvus-lite`` command of the Milvus Lite 3.x environment, or None when it is not installed.

    milvus-lite 3.x imports pymilvus's gRPC stubs without declaring the dependency, so an environment without
    pymilvus counts as not installed (its server would exit at once).
    """
    root = Path(venv if venv is not None else os.environ.get(ENV_VENV, DEFAULT_VENV))
    exe = root / "bin" / "milvus-lite"
    has_pymilvus = any(root.glob("lib/python*/site-packages/pymilvus"))
    return exe if exe.is_file() and has_pymilvus else None


def stop_group(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """Terminate the process group of ``proc`` (started with ``start_new_session=True``: the group's id is its pid),
    wait up to ``timeout_s`` for every member to exit, then kill what is left."""
    group = proc.pid
    _signal_group(group, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (proc.poll() is None or _group_alive(group)):
        time.sleep(0.1)
    if proc.poll() is None or _group_alive(group):
        _signal_group(group, signal.SIGKILL)
    proc.wait()


def _signal_group(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Ports a server started on a port of its own choosing tries before giving up on a shared one.
PORT_ATTEMPTS = 3


def listening_inodes(port: int) -> List[str]:
    """The socket inodes listening on TCP ``port`` here (``/proc/net/tcp`` and ``tcp6``; none where unreadable).

    Milvus Lite's gRPC server binds with SO_REUSEPORT: a second server started on a port another one holds comes up
    without an error, and the kernel then hands each new connection to either of them."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.append(fields[9])
    return found


def listeners(port: int) -> int:
    """How many sockets listen on TCP ``port`` here (:func:`listening_inodes`)."""
    return len(listening_inodes(port))


def group_listens(group: int, port: int) -> bool:
    """True when a process of process group ``group`` holds one of the sockets listening on ``port``."""
    wanted = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if int(proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[2]) != group:
                continue
            if any(os.readlink(fd) in wanted for fd in proc.joinpath("fd").iterdir()):
                return True
        except (OSError, ValueError, IndexError):
            continue
    return False


class LiteServer:
    """Start with :meth:`start` (or as a context manager); :attr:`uri` is ``http://127.0.0.1:PORT``."""

    def __init__(self, executable: Path, *, data_dir: Optional[Path] = None, port: Optional[int] = None,
                 start_timeout_s: float = 60.0) -> None:
        self.executable = executable
        self.data_dir = data_dir
        self.port = port if port is not None else free_port()
        self._port_chosen = port is None
        self.start_timeout_s = start_timeout_s
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self._proc: Optional[subprocess.Popen] = None
        self.log_path: Optional[Path] = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "LiteServer":
        """Start the server; one that finds its port also held by another listener (the free port was taken between
        choosing and binding it) moves to another free port, or raises naming the port when it was given."""
        for _ in range(PORT_ATTEMPTS):
            self._launch()
            assert self._proc is not None
            deadline = time.monotonic() + self.start_timeout_s
            ours = group_listens(self._proc.pid, self.port)
            while not ours and time.monotonic() < deadline:
                time.sleep(0.1)  # the launcher says "up" before the Milvus binary it started listens
                ours = group_listens(self._proc.pid, self.port)
            if ours and listeners(self.port) == 1:  # only ours: not another server answering in its place
                return self
            stop_group(self._proc)
            self._proc = None
            if not self._port_chosen:
                break
            self.port = free_port()
        self.stop()
        raise RuntimeError(f"port {self.port} is also held by another listener: a server there would receive only "
                           f"part of the connections")

    def _launch(self) -> None:
        """Start the server process on :attr:`port` and return once it serves (raises when it cannot)."""
        if self.data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="convrag-lite3-")
            self.data_dir = Path(self._tmp.name) / "data"
        self.log_path = Path(str(self.data_dir) + ".log")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen([str(self.executable), "server", "--data-dir", str(self.data_dir),
                                           "--host", "127.0.0.1", "--port", str(self.port)],
                                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"milvus-lite server exited with {self._proc.returncode}; log: {self.log_path}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"milvus-lite server did not listen on port {self.port} within {self.start_timeout_s} s")

    def stop(self) -> None:
        """Stop the server and every process it started (its own process group: the Milvus binary a Python
        launcher starts outlives a launcher that is only terminated)."""
        if self._proc is not None:
            stop_group(self._proc)
        self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "LiteServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
