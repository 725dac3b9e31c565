"""testing/lite_server.py: which environments count as a usable Milvus Lite 3.x install."""

from __future__ import annotations

from pathlib import Path

from llama_index_convrag.testing.lite_server import SETUP_HINT, group_listens, lite3_executable, listeners


def _venv(root: Path, *, exe: bool, pymilvus: bool) -> Path:
    if exe:
        (root / "bin").mkdir(parents=True)
        (root / "bin" / "milvus-lite").write_text("#!/bin/sh\n")
    if pymilvus:
        (root / "lib" / "python3.11" / "site-packages" / "pymilvus").mkdir(parents=True)
    return root


def test_an_environment_with_the_command_and_pymilvus_is_usable(tmp_path: Path) -> None:
    root = _venv(tmp_path / "v", exe=True, pymilvus=True)
    assert lite3_executable(str(root)) == root / "bin" / "milvus-lite"


def test_milvus_lite_without_pymilvus_is_not_usable(tmp_path: Path) -> None:
    # milvus-lite 3.2 imports pymilvus's gRPC stubs without declaring it: its server exits at once
    assert lite3_executable(str(_venv(tmp_path / "v", exe=True, pymilvus=False))) is None


def test_a_missing_environment_is_not_usable(tmp_path: Path) -> None:
    assert lite3_executable(str(tmp_path / "absent")) is None


def test_the_setup_hint_installs_both_packages() -> None:
    assert '"milvus-lite>=3" pymilvus' in SETUP_HINT


def test_stopping_a_milvus_server_ends_every_process_it_started(tmp_path: Path) -> None:
    # the launcher (python) starts the milvus binary, which outlives a launcher that is only terminated
    import subprocess

    from llama_index_convrag.testing.milvus_server import MilvusLiteServer

    server = MilvusLiteServer(tmp_path / "m").start()
    group = server._proc.pid
    members = subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True).stdout.split()
    assert len(members) >= 2, members  # the launcher and the milvus binary
    server.stop()
    assert subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True).stdout.split() == []


def test_a_server_refuses_a_port_another_milvus_server_holds_and_logs_to_a_file(tmp_path: Path) -> None:
    """Milvus Lite binds with SO_REUSEPORT: two servers on one port would both come up and split the connections."""
    import os

    import pytest

    from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus
    from llama_index_convrag.testing.milvus_server import MilvusLiteServer

    with MilvusLiteServer(tmp_path / "a") as first:
        assert listeners(first.port) == 1 and group_listens(first._proc.pid, first.port)
        assert not group_listens(os.getpid(), first.port)
        with pytest.raises(RuntimeError, match=rf"port {first.port} is also held by another listener"):
            MilvusLiteServer(tmp_path / "b", port=first.port).start()
        assert listeners(first.port) == 1
        client = connect_milvus(MilvusTarget(uri=first.uri))
        client.create_collection("c", dimension=2)
        client.insert("c", [{"id": i, "vector": [0.5, 0.5]} for i in range(3)])
        assert first.log_path is not None and first.log_path.is_file()  # its output is read, not left in a pipe
