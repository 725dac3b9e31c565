"""Validation in ``cli_commands.common`` (no I/O) and through ``main``: collection names, URIs, the busy file."""

import json
import re
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llama_index_convrag.cli import main
from llama_index_convrag.cli_commands.common import CLIError, check_collection_name, check_question, check_uri
from llama_index_convrag.milvus.client import lite_own_lock_holder, suggest_collection_name

FUZZ = settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))


def run(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name,why,suggestion", [
    ("my docs", "may only hold ASCII letters, digits and underscores (found ' ')", "my_docs"),
    ("docs-2024", "(found '-')", "docs_2024"),
    ("1docs", "must start with an ASCII letter or an underscore", "c_1docs"),
    ("dökümanlar", "(found 'kmnöü')".replace("kmnöü", "öü"), "dokumanlar"),
    ("a" * 300, "is 300 characters long (at most 255)", "a" * 255),
    ("", "is empty", "convrag"),
])
def test_bad_collection_names_exit_2_with_a_valid_suggestion(name, why, suggestion):
    with pytest.raises(CLIError) as info:
        check_collection_name(name)
    assert info.value.code == 2
    assert why in str(info.value) and str(info.value).endswith(f"try --collection {suggestion}")
    assert check_collection_name(suggestion) == suggestion


@pytest.mark.parametrize("name", ["my docs", "docs-2024", "1docs", "dökümanlar", "x" * 300, ""])
def test_bad_collection_name_is_refused_before_any_io(capsys, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("hello")
    code, out, err = run(capsys, ["ingest", "d", "--collection", name])
    assert code == 2 and out == "" and err.count("\n") == 1 and "try --collection " in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


@pytest.mark.parametrize("uri,why", [
    ("ftp://foo", "scheme 'ftp' is not one Milvus speaks"),
    ("http://", "has no host"),
    ("data/milvus", "is a file path not ending in .db"),
    ("  ", "is empty"),
])
def test_bad_uris_name_the_accepted_forms(capsys, tmp_path, uri, why):
    code, out, err = run(capsys, ["ingest", str(tmp_path), "--uri", uri, "--json"])
    assert code == 2
    message = json.loads(out)["error"]["message"]
    assert why in message and "accepted: a Milvus Lite file path ending in .db" in message
    assert "http://HOST:PORT" in message and "unix:/path/to/milvus.sock" in message


@pytest.mark.parametrize("uri", ["./convrag.db", "/abs/x.db", "http://localhost:19530", "https://h.example:443",
                                 "tcp://10.0.0.1:19530", "unix:/tmp/milvus.sock"])
def test_good_uris_pass(uri):
    assert check_uri(uri) == uri


def test_env_uri_is_checked_too(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CONVRAG_MILVUS_URI", "ftp://foo")
    (tmp_path / "a.txt").write_text("hello")
    code, _, err = run(capsys, ["ingest", str(tmp_path / "a.txt")])
    assert code == 2 and "scheme 'ftp'" in err


def test_second_process_on_the_lite_file_exit_8_names_it(capsys, tmp_path):
    db = tmp_path / "convrag.db"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, sys
        f = open({str(tmp_path / '.convrag.db.lock')!r}, 'a'); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print('held', flush=True); sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lite_own_lock_holder(str(db)) == holder.pid
        (tmp_path / "a.txt").write_text("hello")
        code, out, err = run(capsys, ["ingest", str(tmp_path / "a.txt"), "--uri", str(db)])
        assert code == 8 and out == ""
        assert f"is in use by another process (pid {holder.pid}: {sys.executable} -c" in err
        assert "wait for it to finish, use another file" in err and "at http://HOST:PORT" in err
    finally:
        holder.stdin.close()
        holder.wait()
    assert lite_own_lock_holder(str(db)) is None


# --- property-based: names and questions -----------------------------------------------------------------------
@FUZZ
@given(st.text(max_size=300))
def test_any_collection_name_is_accepted_or_refused_with_a_valid_suggestion(name):
    try:
        assert check_collection_name(name) == name
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,254}", name)
    except CLIError as exc:
        assert exc.code == 2
        suggestion = str(exc).rsplit("try --collection ", 1)[1]
        assert check_collection_name(suggestion) == suggestion == suggest_collection_name(name)


@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(st.text(max_size=20), st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)))
def test_our_name_rule_agrees_with_milvus(milvus_client, name):
    """What the validator accepts, Milvus Lite creates; what it refuses, Milvus refuses too (raw pymilvus call)."""
    try:
        check_collection_name(name)
        ours = True
    except CLIError:
        ours = False
    try:
        milvus_client.create_collection(name, dimension=4)
        theirs = True
        milvus_client.drop_collection(name)
    except Exception:
        theirs = False
    assert ours == theirs, name


@FUZZ
@given(st.text(max_size=5000))
def test_any_question_is_returned_stripped_or_refused_with_exit_2_or_7(text):
    try:
        q = check_question(text)
        assert q == text.strip() and 0 < len(q) <= 4000
    except CLIError as exc:
        assert (exc.code, bool(text.strip())) in ((2, False), (7, True))
