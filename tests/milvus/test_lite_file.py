"""A damaged Milvus Lite file is named with its cause (milvus/client.py: check_lite_file, lite_server_errors)."""

from pathlib import Path

import pytest

from llama_index_convrag.milvus.client import (SQLITE_HEADER, MilvusConnectionError, MilvusTarget, check_lite_file,
                                               connect_milvus, lite_server_errors, server_log_path)


def test_a_file_that_is_not_sqlite_is_named_before_milvus_lite_starts(tmp_path: Path):
    db = tmp_path / "bad.db"
    db.write_bytes(b"PK\x03\x04 this was a zip archive" * 100)
    message = (f"{str(db)!r} is not a Milvus Lite database (those are SQLite files; this one starts with "
               f"b'PK\\x03\\x04 thi'): it is damaged or another kind of file; move it away and ingest again, or "
               f"pass another --uri")
    with pytest.raises(MilvusConnectionError) as info:
        check_lite_file(str(db))
    assert str(info.value) == message
    with pytest.raises(MilvusConnectionError, match="is not a Milvus Lite database"):
        connect_milvus(MilvusTarget(str(db)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.db"]  # no lock, no server log


def test_missing_empty_and_sqlite_files_pass_and_a_folder_is_named(tmp_path: Path):
    check_lite_file(str(tmp_path / "none.db"))
    (tmp_path / "empty.db").write_bytes(b"")
    check_lite_file(str(tmp_path / "empty.db"))
    (tmp_path / "ok.db").write_bytes(SQLITE_HEADER + b"\0" * 100)
    check_lite_file(str(tmp_path / "ok.db"))
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(MilvusConnectionError, match=r"cannot open Milvus Lite file '.*dir.db': it is a folder"):
        check_lite_file(str(tmp_path / "dir.db"))


def test_a_damaged_sqlite_file_says_what_milvus_lite_said(tmp_path: Path):
    db = tmp_path / "torn.db"
    db.write_bytes(SQLITE_HEADER + bytes(range(256)) * 64)  # the header survived, the rest did not
    with pytest.raises(MilvusConnectionError) as info:
        connect_milvus(MilvusTarget(str(db)))
    said = lite_server_errors(MilvusTarget(str(db)))
    assert said, server_log_path(MilvusTarget(str(db))).read_text()
    assert str(info.value).endswith(f"; Milvus Lite says: {said[0]}")
    assert str(db) in str(info.value)


def test_server_errors_are_read_from_an_offset_without_their_prefix(tmp_path: Path):
    target = MilvusTarget(str(tmp_path / "x.db"))
    log = server_log_path(target)
    old = "E20261124 20:00:00.000000 1 server.cpp:73] [SERVER][main][milvus][]old failure\n"
    log.write_text(old + "I20261124 20:00:01.000000 1 x.cpp:1] [SERVER] fine\n"
                   "E20261124 20:00:02.000000 1 collection_meta.cpp:94] [SERVER][CreateTable][milvus][]Create table "
                   "failed, errs: file is not a database\nERROR root: Start milvus-lite failed\n")
    assert lite_server_errors(target, since=len(old)) == ["Create table failed, errs: file is not a database"]
    assert lite_server_errors(target)[0] == "old failure"
