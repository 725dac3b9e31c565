"""LlamaServer without the runtime: validation, the exact command, and a failed start that names the cause."""

import socket
import sys
from pathlib import Path

import pytest

from llama_index_convrag.config.llamacpp_server import LlamaServer, LlamaServerError, free_port, has_server


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-model.gguf"
    path.write_bytes(b"GGUF not really")
    return path


def test_command_is_the_documented_server_invocation(gguf: Path) -> None:
    server = LlamaServer(gguf, python="/opt/py/bin/python", n_ctx=4096, n_threads=1, n_threads_batch=2)
    assert server.command(8123) == [
        "/opt/py/bin/python", "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "tiny-model",
        "--host", "127.0.0.1", "--port", "8123", "--n_ctx", "4096", "--n_threads", "1", "--n_threads_batch", "2"]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"n_ctx": 100}, ValueError, "n_ctx must be >= 256, got 100"),
    ({"n_threads": 0}, ValueError, "n_threads must be >= 1, got 0"),
    ({"n_threads_batch": 0}, ValueError, "n_threads_batch must be >= 1, got 0"),
    ({"startup_timeout": 0}, ValueError, "startup_timeout must be > 0, got 0"),
])
def test_validation_names_the_value(gguf: Path, kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        LlamaServer(gguf, **kwargs)


def test_missing_model_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="GGUF model file not found: .*none.gguf"):
        LlamaServer(tmp_path / "none.gguf")


def test_start_without_the_runtime_fails_with_the_log_tail(gguf: Path, tmp_path: Path) -> None:
    if has_server(sys.executable):
        pytest.skip("this interpreter has llama_cpp.server")
    server = LlamaServer(gguf, python=sys.executable, log_path=tmp_path / "server.log")
    with pytest.raises(LlamaServerError, match=r"exited with code 1 before serving(.|\n)*No module named 'llama_cpp'"):
        server.start()
    assert not server.running


def test_base_url_needs_start_and_free_port_is_bindable(gguf: Path) -> None:
    with pytest.raises(RuntimeError, match="not started"):
        LlamaServer(gguf).base_url
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
