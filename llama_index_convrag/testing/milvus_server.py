"""A Milvus server process for tests and benches: the embedded milvus-lite 2.5.1's own gRPC server on a TCP port.

Unlike a Milvus Lite file, which one process opens, a server is reached by many processes at once (Ray workers,
several ``convrag serve`` workers); clients connect with ``http://127.0.0.1:PORT``. Start with :meth:`start` or as
a context manager; the database file lives in ``data_dir`` (a temporary folder when not given). The process is
this Python running milvus-lite's ``Server``, not Milvus Lite 3.x's ``milvus-lite server`` command.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any, Callable, List, Optional

from llama_index_convrag.milvus.client import LITE_GRPC_OPTIONS
from llama_index_convrag.testing.lite_server import LiteServer

#: Run by ``python -c`` with the database file and the address: serves until terminated, prints "up" when ready.
SERVE_SCRIPT = """
import sys, time
from llama_index_convrag.milvus.pkg_resources_shim import ensure_pkg_resources
ensure_pkg_resources()  # milvus-lite 2.5.1 imports pkg_resources, absent from newer setuptools
from milvus_lite.server import Server
server = Server(sys.argv[1], address=sys.argv[2])
if not (server.init() and server.start()):
    sys.exit("milvus-lite server did not start")
print("up", flush=True)
while True:
    time.sleep(1)
"""


class MilvusLiteServer(LiteServer):
    """``uri`` is ``http://127.0.0.1:PORT`` once started; stopping and the context manager are :class:`LiteServer`'s."""

    def __init__(self, data_dir: Optional[Path] = None, *, port: Optional[int] = None) -> None:
        super().__init__(Path(sys.executable), data_dir=data_dir, port=port)

    def command(self, db_file: Path) -> List[str]:
        return [str(self.executable), "-W", "ignore", "-c", SERVE_SCRIPT, str(db_file), f"127.0.0.1:{self.port}"]

    def _launch(self) -> None:
        if self.data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="convrag-milvus-")
            self.data_dir = Path(self._tmp.name)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(self.command(self.data_dir / "milvus.db"), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)  # stop() ends the whole group
        self._proc = proc
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if b"up" not in first:
            rest = proc.stdout.read().decode(errors="replace")[-2000:]
            self.stop()
            raise RuntimeError(f"milvus-lite could not serve on port {self.port}: {first!r} {rest}")
        self.log_path = self.data_dir / "milvus.log"
        threading.Thread(target=_copy_output, args=(proc.stdout, self.log_path), daemon=True).start()


def _copy_output(pipe: IO[bytes], path: Path) -> None:
    """Copy a server's output to ``path`` until it exits: the Milvus binary writes a few lines to stderr per BM25
    index commit, and a pipe nobody reads holds 64 KiB, after which the server would block in the middle of a call."""
    with open(path, "ab") as log:
        for line in iter(pipe.readline, b""):
            log.write(line)
            log.flush()


def use_lite_grpc_options() -> Callable[[], None]:
    """Give every pymilvus client this process makes from now on the keepalive options that ``connect_milvus`` gives
    a Milvus Lite file's client; returns the undo.

    For clients that ``connect_milvus`` does not configure: a third party's (LlamaIndex's ``MilvusVectorStore``), and
    any client of a :class:`MilvusLiteServer`, which serves Lite's engine on an ``http://`` URI and, like it, answers
    the pings of an idle connection with GOAWAY "too_many_pings" (a client idle for about 40 s then hung on its next
    call in a scratch reproduction).
    """
    from pymilvus.client.async_grpc_handler import AsyncGrpcHandler
    from pymilvus.client.grpc_handler import GrpcHandler

    originals = {cls: cls.__init__ for cls in (GrpcHandler, AsyncGrpcHandler)}

    def wrap(init: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("grpc_options", dict(LITE_GRPC_OPTIONS))
            init(self, *args, **kwargs)

        return __init__

    for cls, init in originals.items():
        cls.__init__ = wrap(init)

    def undo() -> None:
        for cls, init in originals.items():
            cls.__init__ = init

    return undo
