"""``LlamaServer``: run llama-cpp-python's OpenAI-compatible server for a local GGUF on a free loopback port.

``python -m llama_cpp.server --model M --host 127.0.0.1 --port P --n_ctx N`` serves ``/v1/chat/completions``
(streaming too) with the chat template stored in the GGUF, so the package's OpenAI-compatible client talks to it
unchanged, exactly as it talks to vLLM, a llama.cpp server or Ollama. ``start`` waits until ``/v1/models`` answers;
``stop`` terminates the process. The server runs under any Python that has ``llama_cpp.server`` (the ``llamacpp``
extra, or the real-LLM tier's own virtualenv, see :mod:`llama_index_convrag.testing.real_llm`).
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Dict, List, Optional, Sequence, Union
from llama_index_convrag.errors import ConfigurationError, PathNotFoundError

SERVER_MODULE = "llama_cpp.server"
INSTALL_HINT = "pip install 'llama-index-convrag[llamacpp]'"


class LlamaServerError(RuntimeError):
    """The server could not start (missing runtime, bad model, timeout); the message holds the log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def has_server(python: Union[str, Path]) -> bool:
    """True when ``python`` can import ``llama_cpp.server`` (checked in a subprocess: importing it is slow)."""
    try:
        done = subprocess.run([str(python), "-c", f"import {SERVER_MODULE}"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


class LlamaServer:
    """One ``llama_cpp.server`` process serving ``model`` (a GGUF path) on ``host``; use as a context manager.

    ``n_threads`` (generation) and ``n_threads_batch`` (prompt processing) default to the server's own choice:
    half the cores and all cores. On a loaded 2-core machine that is the fast setting: 2 generation threads made
    each token 6-9x slower (1.2 s instead of 0.18 s) while 2 prompt threads doubled prompt speed.
    """

    def __init__(
        self,
        model: Union[str, Path],
        *,
        python: Union[str, Path, None] = None,
        n_ctx: int = 4096,
        n_threads: Optional[int] = None,
        n_threads_batch: Optional[int] = None,
        host: str = "127.0.0.1",
        port: Optional[int] = None,
        model_alias: Optional[str] = None,
        startup_timeout: float = 300.0,
        log_path: Union[str, Path, None] = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        model = Path(model)
        if not model.is_file():
            raise PathNotFoundError(f"GGUF model file not found: {str(model)!r}")
        if n_ctx < 256:
            raise ConfigurationError(f"n_ctx must be >= 256, got {n_ctx!r}")
        for name, value in (("n_threads", n_threads), ("n_threads_batch", n_threads_batch)):
            if value is not None and value < 1:
                raise ConfigurationError(f"{name} must be >= 1, got {value!r}")
        if startup_timeout <= 0:
            raise ConfigurationError(f"startup_timeout must be > 0, got {startup_timeout!r}")
        self.model = model
        self.python = Path(python) if python is not None else Path(sys.executable)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_threads_batch = n_threads_batch
        self.host = host
        self.requested_port = port
        self.model_alias = model_alias if model_alias is not None else model.stem
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path is not None else None
        self.extra_args = list(extra_args)
        self.port: Optional[int] = None
        self.startup_seconds: Optional[float] = None
        self._process: Optional[subprocess.Popen] = None
        self._log: Optional[IO[bytes]] = None

    # lifecycle -------------------------------------------------------------------------------------------------
    def command(self, port: int) -> List[str]:
        cmd = [str(self.python), "-m", SERVER_MODULE, "--model", str(self.model), "--model_alias", self.model_alias,
               "--host", self.host, "--port", str(port), "--n_ctx", str(self.n_ctx)]
        if self.n_threads is not None:
            cmd += ["--n_threads", str(self.n_threads)]
        if self.n_threads_batch is not None:
            cmd += ["--n_threads_batch", str(self.n_threads_batch)]
        return cmd + self.extra_args

    def start(self) -> "LlamaServer":
        if self._process is not None:
            return self
        port = self.requested_port if self.requested_port is not None else free_port(self.host)
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="llama_server_", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self._log = open(self.log_path, "wb")
        began = time.perf_counter()
        try:
            self._process = subprocess.Popen(self.command(port), stdout=self._log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
        except OSError as exc:
            self._close_log()
            raise LlamaServerError(f"cannot run {str(self.python)!r}: {exc}; {INSTALL_HINT}") from exc
        self.port = port
        deadline = began + self.startup_timeout
        while True:
            code = self._process.poll()
            if code is not None:
                self._process = None
                self._close_log()
                raise LlamaServerError(f"llama_cpp.server exited with code {code} before serving; log "
                                       f"{self.log_path}:\n{self.log_tail()}")
            if self._ready():
                self.startup_seconds = time.perf_counter() - began
                return self
            if time.perf_counter() > deadline:
                self.stop()
                raise LlamaServerError(f"llama_cpp.server did not answer on {self.base_url} within "
                                       f"{self.startup_timeout:.0f} s; log {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
        self._close_log()

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the server is not started; call start() first")
        return f"http://{self.host}:{self.port}/v1"

    def client_kwargs(self, *, max_tokens: Optional[int] = 512, temperature: float = 0.0, timeout: float = 600.0,
                      function_calling: bool = True) -> Dict[str, Any]:
        """Keyword arguments of :class:`~llama_index_convrag.config.OpenAICompatible` for this server (greedy by
        default): ``OpenAICompatible(**server.client_kwargs())``."""
        return {"model": self.model_alias, "api_base": self.base_url, "api_key": "not-needed",
                "context_window": self.n_ctx, "max_tokens": max_tokens, "temperature": temperature,
                "timeout": timeout, "max_retries": 0, "function_calling": function_calling}

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    # helpers ---------------------------------------------------------------------------------------------------
    def _ready(self) -> bool:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=2)
        try:
            conn.request("GET", "/v1/models")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


__all__ = ["INSTALL_HINT", "LlamaServer", "LlamaServerError", "free_port", "has_server"]
