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


def test_serve_without_the_extra_names_it(tmp_path: Path, capsys: pytest.CaptureFixture,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if the serve extra were not installed
    assert main(["serve", "--store", str(tmp_path / "c.db"), "--uri", str(tmp_path / "m.db")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'llama-index-convrag[serve]'" in err and "uvicorn" in err


def test_keys_with_scopes_users_and_knowledge_bases(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    store, uri = str(tmp_path / "chats.db"), str(tmp_path / "m.db")
    assert main(["keys", "create", "bob", "--scope", "chat", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["scopes"] == ["chat"]
    assert main(["keys", "create", "bob", "--scope", "admin", "--store", store]) == 2
    assert "the admin scope needs an admin user" in capsys.readouterr().err
    assert main(["users", "set-role", "bob", "admin", "--store", store]) == 0
    capsys.readouterr()
    assert main(["users", "list", "--store", store, "--json"]) == 0
    users = json.loads(capsys.readouterr().out)["users"]
    assert [(u["id"], u["role"]) for u in users] == [("bob", "admin")]
    assert main(["kb", "create", "team-docs", "--owner", "alice", "--store", store, "--uri", uri, "-q"]) == 0
    capsys.readouterr()
    assert main(["kb", "share", "team-docs", "*", "--store", store, "--uri", uri]) == 0
    assert main(["kb", "members", "team-docs", "--store", store, "--uri", uri, "--json"]) == 0
    members = json.loads(capsys.readouterr().out.split("\n", 1)[1])["members"]
    assert [(m["user_id"], m["role"]) for m in members] == [("alice", "owner"), ("*", "reader")]
    assert main(["kb", "share", "nope", "bob", "--store", store, "--uri", uri]) == 3
    assert "no knowledge base named 'nope'; known: ['team-docs']" in capsys.readouterr().err
    assert main(["kb", "delete", "team-docs", "--store", store, "--uri", uri]) == 0
    s = SQLiteConversationStore(store)
    assert s.list_knowledge_bases() == []
    s.close()


def test_help_and_serve_agree_on_the_question_limit() -> None:
    from llama_index_convrag._limits import MAX_QUESTION_CHARS
    from llama_index_convrag.cli import build_parser
    from llama_index_convrag.cli_commands.common import EXIT_CODES_HELP
    from llama_index_convrag.serve import Limits

    assert build_parser().parse_args(["serve"]).max_question_chars == Limits().max_question_chars == MAX_QUESTION_CHARS
    assert f"question longer than the limit ({MAX_QUESTION_CHARS:,} characters" in EXIT_CODES_HELP
