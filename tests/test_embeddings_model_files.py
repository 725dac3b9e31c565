"""The variants' cached files: the source file's hash is computed once per install, not once per process."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import List

import pytest

from llama_index_convrag.embeddings import model_files
from llama_index_convrag.embeddings.model_files import source_digest
from llama_index_convrag.errors import PathNotFoundError


@pytest.fixture()
def hashed(monkeypatch: pytest.MonkeyPatch) -> List[Path]:
    """The files ``sha256_file`` reads (it still reads them)."""
    calls: List[Path] = []
    real = model_files.sha256_file

    def counting(path: Path) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(model_files, "sha256_file", counting)
    return calls


def test_the_hash_is_read_from_the_cache_until_the_file_changes(tmp_path, hashed):
    source, cache = tmp_path / "model.onnx", tmp_path / "cache"
    source.write_bytes(b"weights v1")
    first = source_digest(source, cache)
    assert first == hashlib.sha256(b"weights v1").hexdigest() and hashed == [source]
    assert source_digest(source, cache) == first and hashed == [source]  # the second process reads the record
    [record] = cache.iterdir()
    assert record.name.startswith("sha256-") and record.read_text() == first
    source.write_bytes(b"weights v2")  # a new size and modification time: hashed again
    os.utime(source, ns=(1, 1))
    assert source_digest(source, cache) == hashlib.sha256(b"weights v2").hexdigest() and len(hashed) == 2
    assert source_digest(source, cache) == hashlib.sha256(b"weights v2").hexdigest() and len(hashed) == 2


def test_a_damaged_record_is_hashed_again_and_a_missing_source_named(tmp_path, hashed):
    source, cache = tmp_path / "model.onnx", tmp_path / "cache"
    source.write_bytes(b"weights")
    source_digest(source, cache)
    [record] = cache.iterdir()
    record.write_text("not a digest")
    assert source_digest(source, cache) == hashlib.sha256(b"weights").hexdigest() and len(hashed) == 2
    assert record.read_text() == hashlib.sha256(b"weights").hexdigest()
    assert [p for p in cache.iterdir() if p.name.startswith(".")] == []  # no temporary file left behind
    with pytest.raises(PathNotFoundError, match=r"ONNX model file not found: '.*missing.onnx'"):
        source_digest(tmp_path / "missing.onnx", cache)


def test_an_unwritable_cache_still_gives_the_hash(tmp_path, hashed):
    source = tmp_path / "model.onnx"
    source.write_bytes(b"weights")
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    assert source_digest(source, blocked) == hashlib.sha256(b"weights").hexdigest()
    assert source_digest(source, blocked) == hashlib.sha256(b"weights").hexdigest() and len(hashed) == 2
