"""``convrag keys`` and the checks ``convrag serve`` makes before it binds (no server is started here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_convrag.cli import main
from llama_index_convrag.storage.conversation import SQLiteConversationStore


def test_keys_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    store = str(tmp_path / "chats.db")
    assert main(["keys", "create", "alice", "--store", store, "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["user_id"] == "alice" and created["key"].startswith("ck_")
    assert created["key"].startswith(created["prefix"])
    s = SQLiteConversationStore(store)
    assert s.user_for_key(created["key"]) == "alice"
    s.close()
    assert created["key"] not in Path(store).read_bytes().decode("latin-1")  # only the hash is stored
    assert main(["keys", "list", "--store", store, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["keys"]
    assert [(k["id"], k["user_id"], k["revoked_at"]) for k in listed] == [(created["id"], "alice", None)]
    assert main(["keys", "revoke", created["id"], "--store", store]) == 0
    assert main(["keys", "revoke", created["id"], "--store", store]) == 3
    assert "no active key with id" in capsys.readouterr().err
    s = SQLiteConversationStore(store)
    assert s.user_for_key(created["key"]) is None
    s.close()


def test_serve_refuses_open_non_loopback_and_lite_workers(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    store = str(tmp_path / "chats.db")
    uri = str(tmp_path / "m.db")
    assert main(["serve", "--host", "0.0.0.0", "--store", store, "--uri", uri]) == 2
    err = capsys.readouterr().err
    assert "refusing to serve on '0.0.0.0' without API keys" in err and "convrag keys create" in err
    assert main(["serve", "--workers", "2", "--store", store, "--uri", uri]) == 2
    assert "--workers > 1 needs a Milvus server" in capsys.readouterr().err
