"""``convrag memory``: a conversation's summary shown, edited (a new version), cleared; a user's facts listed and
deleted; another user's rows absent; bad arguments named. Through ``main`` on a real SQLite store file."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from llama_index_convrag.cli import main
from llama_index_convrag.cli_commands.common import EXIT_INPUT, EXIT_USAGE
from llama_index_convrag.storage.conversation import SQLiteConversationStore


def run(capsys: pytest.CaptureFixture, argv: List[str]) -> Tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def stored(tmp_path: Path) -> Dict[str, Any]:
    """A store with alice's conversation (two summary versions, two facts, one of them replaced) and bob's fact."""
    path = tmp_path / "chats.db"
    store = SQLiteConversationStore(path)
    conv = store.create_conversation("alice").id
    user, _ = store.begin_turn(conv, "My sister Ana is allergic to peanuts.")
    store.put_summary("alice", conv, "Alice asked about BM25.", covers_to=None, covered=2, tokens=6, source="llm")
    store.put_summary("alice", conv, "Alice's sister Ana is allergic to peanuts.", covers_to=None, covered=4,
                      tokens=10, source="llm")
    old = store.add_fact("alice", "Alice lives in Porto.", source_message_id=user.id, conversation_id=conv)
    new = store.add_fact("alice", "Alice lives in Lisbon.", source_message_id=user.id, conversation_id=conv,
                         replaces=old.id)
    tea = store.add_fact("alice", "Alice drinks green tea.")
    bob = store.add_fact("bob", "Bob lives in Oslo.")
    store.close()
    return {"argv": ["--store", str(path)], "path": path, "conv": conv, "facts": [new.id, tea.id], "old": old.id,
            "bob": bob.id, "message": user.id}


def test_show_the_summary_and_its_versions(capsys: pytest.CaptureFixture, stored: Dict[str, Any]) -> None:
    code, out, _ = run(capsys, ["memory", "show", stored["conv"], "--user", "alice", *stored["argv"]])
    assert code == 0 and out.splitlines()[1:] == ["Alice's sister Ana is allergic to peanuts."]
    assert out.startswith("# version 2 (llm, 10 tokens, 4 messages, ")
    code, out, _ = run(capsys, ["memory", "show", stored["conv"], "--user", "alice", "--versions", "--json",
                                *stored["argv"]])
    got = json.loads(out)
    assert code == 0 and [(v["version"], v["text"]) for v in got["summary"]] == [
        (1, "Alice asked about BM25."), (2, "Alice's sister Ana is allergic to peanuts.")]


def test_edit_keeps_a_new_version_and_clear_removes_every_one(capsys: pytest.CaptureFixture,
                                                              stored: Dict[str, Any], monkeypatch: Any) -> None:
    alice = ["--user", "alice", *stored["argv"]]
    code, out, _ = run(capsys, ["memory", "edit", stored["conv"], "Ana (the sister) avoids peanuts.", *alice])
    assert (code, out) == (0, f"summary version 3 of {stored['conv']} (8 tokens)\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("From stdin.\n"))
    code, out, _ = run(capsys, ["memory", "edit", stored["conv"], "-", "--json", *alice])
    assert code == 0 and (json.loads(out)["version"], json.loads(out)["source"]) == (4, "edit")
    code, out, _ = run(capsys, ["memory", "show", stored["conv"], *alice])
    assert out.splitlines()[1:] == ["From stdin."]
    code, out, err = run(capsys, ["memory", "edit", stored["conv"], "word " * 30, "--max-tokens", "16", *alice])
    assert code == EXIT_USAGE and "over the cap of 16" in err and "(--max-tokens)" in err
    code, out, _ = run(capsys, ["memory", "clear", stored["conv"], *alice])
    assert (code, out) == (0, f"cleared 4 summary version(s) of {stored['conv']}\n")
    code, out, err = run(capsys, ["memory", "show", stored["conv"], *alice])
    assert (code, out) == (0, "") and "has no summary yet" in err


def test_facts_are_listed_and_forgotten_per_user(capsys: pytest.CaptureFixture, stored: Dict[str, Any]) -> None:
    alice = ["--user", "alice", *stored["argv"]]
    code, out, err = run(capsys, ["memory", "facts", *alice])
    assert code == 0 and out.splitlines() == [
        f"{stored['facts'][0]}\tAlice lives in Lisbon.\tfrom message {stored['message']}",
        f"{stored['facts'][1]}\tAlice drinks green tea.\tfrom message -"]
    assert "2 fact(s) of user 'alice'" in err
    code, out, _ = run(capsys, ["memory", "facts", "--history", "--json", *alice])
    assert {(f["text"], f["status"]) for f in json.loads(out)["facts"]} == {
        ("Alice lives in Lisbon.", "active"), ("Alice drinks green tea.", "active"),
        ("Alice lives in Porto.", "replaced")}
    # bob's fact is not alice's to delete, and reads as absent
    code, _, err = run(capsys, ["memory", "forget", stored["bob"], *alice])
    assert code == EXIT_INPUT and f"no fact {stored['bob']!r} of user 'alice' (0 deleted)" in err
    code, out, _ = run(capsys, ["memory", "forget", stored["facts"][0], *alice])
    assert (code, out) == (0, "deleted 1 fact(s) of user 'alice'\n")
    code, out, _ = run(capsys, ["memory", "facts", "--history", "--json", *alice])
    assert [f["text"] for f in json.loads(out)["facts"]] == ["Alice drinks green tea."]  # its history went too
    code, out, _ = run(capsys, ["memory", "forget", "--all", *alice])
    assert (code, out) == (0, "deleted 1 fact(s) of user 'alice'\n")
    code, out, _ = run(capsys, ["memory", "facts", "--json", "--user", "bob", *stored["argv"]])
    assert [f["text"] for f in json.loads(out)["facts"]] == ["Bob lives in Oslo."]


def test_another_users_conversation_and_bad_arguments(capsys: pytest.CaptureFixture, stored: Dict[str, Any],
                                                      tmp_path: Path) -> None:
    for action in (["show", stored["conv"]], ["edit", stored["conv"], "mine now"], ["clear", stored["conv"]]):
        code, _, err = run(capsys, ["memory", *action, "--user", "bob", *stored["argv"]])
        assert code == EXIT_INPUT and f"no conversation {stored['conv']!r} of user 'bob'" in err
    code, _, err = run(capsys, ["memory", "show", stored["conv"], *stored["argv"]])  # default user: local
    assert code == EXIT_INPUT and "of user 'local'" in err
    code, _, err = run(capsys, ["memory", "edit", stored["conv"], "  ", "--user", "alice", *stored["argv"]])
    assert code == EXIT_USAGE and "the summary text is blank" in err
    for argv in (["forget"], ["forget", stored["facts"][0], "--all"]):
        code, _, err = run(capsys, ["memory", *argv, "--user", "alice", *stored["argv"]])
        assert code == EXIT_USAGE and "name the facts to forget" in err
    missing = tmp_path / "none.db"
    code, _, err = run(capsys, ["memory", "facts", "--store", str(missing)])
    assert code == EXIT_INPUT and "no conversation store at" in err and not missing.exists()


@pytest.mark.parametrize("argv", [["memory"], ["memory", "show"], ["memory", "edit"], ["memory", "clear"],
                                  ["memory", "facts"], ["memory", "forget"]])
def test_help_has_examples_and_exit_codes(capsys: pytest.CaptureFixture, argv: List[str]) -> None:
    code, out, _ = run(capsys, [*argv, "--help"])
    assert code == 0 and "examples:" in out and "exit codes:" in out
    assert len(argv) == 1 or "--user USER" in out
