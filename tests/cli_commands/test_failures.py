"""Failed runs of the CLI: a damaged .db named, nothing left behind, a full disk said at once with its path."""

import os
import shutil
import subprocess
import sys

import pytest

from llama_index_convrag.cli import main
from llama_index_convrag.cli_commands.common import (EXIT_NO_SPACE, MIN_FREE_BYTES, SPACE_PER_INPUT_BYTE,
                                                     check_free_space, no_space_error, space_watch)
from llama_index_convrag.milvus.client import MilvusTarget


def run(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_damaged_db_is_named_with_its_cause_and_left_as_it_was(capsys, tmp_path):
    db = tmp_path / "bad.db"
    db.write_bytes(b"\x00\x01garbage" * 400)
    code, out, err = run(capsys, ["docs", "list", "--uri", str(db)])
    assert (code, out) == (4, "")
    assert err.startswith(f"convrag: error: {str(db)!r} is not a Milvus Lite database (those are SQLite files; ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.db"] and db.read_bytes() == b"\x00\x01garbage" * 400


def test_an_ingest_that_stores_nothing_leaves_no_db_lock_or_log(capsys, tmp_path, milvus_client):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "empty.txt").write_text("   \n")
    code, _, err = run(capsys, ["ingest", str(folder), "--uri", str(tmp_path / "x.db")])
    assert code == 3 and "nothing could be ingested" in err and "empty file: no text to index" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
    milvus_client.list_collections()  # the clients of other files stay open
    (folder / "good.txt").write_text("Owls hunt at night.")  # the same file can then be created for real
    assert run(capsys, ["ingest", str(folder), "--uri", str(tmp_path / "x.db")])[0] == 0
    assert {"x.db", "x.db.server.log"} <= {p.name for p in tmp_path.iterdir()}


def test_a_failed_run_never_removes_a_file_that_existed_before(capsys, tmp_path):
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "a.txt").write_text("Owls hunt at night.")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "b.txt").write_text("")
    db = str(tmp_path / "x.db")
    assert run(capsys, ["ingest", str(tmp_path / "good"), "--uri", db])[0] == 0
    assert run(capsys, ["ingest", str(tmp_path / "empty"), "--uri", db])[0] == 3
    code, out, _ = run(capsys, ["docs", "list", "--uri", db])
    assert code == 0 and out == f"{(tmp_path / 'good' / 'a.txt').as_posix()}\t1 chunks\n"


def test_a_chat_on_a_missing_database_leaves_no_db(tmp_path):
    """A real process, as a user runs it: ``convrag chat`` before anything was ingested."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-m", "llama_index_convrag.cli", "chat", "--uri", "./x.db"], input="",
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 3
    assert done.stderr == ("convrag: error: collection 'convrag' does not exist; run 'convrag ingest PATH "
                           "--collection convrag' first or pass PATH\n")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_error_is_mapped_to_exit_9_naming_the_path(tmp_path):
    target = MilvusTarget(str(tmp_path / "x.db"))
    with pytest.raises(OSError) as info:  # a real ENOSPC from the kernel
        with open("/dev/full", "w") as f:
            f.write("x")
    mapped = no_space_error(target, RuntimeError("Unexpected error in RPC handling").with_traceback(None))
    assert mapped is None or mapped.code == EXIT_NO_SPACE  # a nearly full /tmp is full too
    chained = RuntimeError("Unexpected error in RPC handling")
    chained.__cause__ = info.value
    err = no_space_error(target, chained)
    assert err is not None and err.code == EXIT_NO_SPACE
    assert str(err).startswith(f"the disk holding the Milvus Lite file {str(tmp_path / 'x.db')!r} is full (")
    assert no_space_error(MilvusTarget("http://localhost:19530"), chained) is None


def test_the_space_check_asks_for_input_times_the_factor(tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 1000)
    check_free_space(MilvusTarget(str(tmp_path / "x.db")), [big])  # this disk has more than 8 kB + 16 MB free
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    assert free > SPACE_PER_INPUT_BYTE * 1000 + MIN_FREE_BYTES


SMALL_DISK = """
set -e
mount -t tmpfs -o size=2m tmpfs "$1"
cd "$2"
exec "$3" -m llama_index_convrag.cli ingest in --uri "$1/x.db"
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_ingest_onto_a_full_disk_says_so_at_once_and_names_the_path(tmp_path):
    """A real 2 MB tmpfs, mounted in a user and mount namespace (no root needed where user namespaces are allowed)."""
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {tmp_path}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {probe.stderr.strip()}")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("Owls hunt at night. " * 500)
    (tmp_path / "disk").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", SMALL_DISK, "sh", str(tmp_path / "disk"), str(tmp_path),
                           sys.executable], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == EXIT_NO_SPACE, done.stderr
    assert done.stderr.startswith(f"convrag: error: not enough free space for the Milvus Lite file "
                                  f"{str(tmp_path / 'disk' / 'x.db')!r}: 2.0 MB free on the disk of "
                                  f"{str(tmp_path / 'disk')!r}, an ingest of 0.0 MB of files needs about 16.1 MB")
    assert list((tmp_path / "disk").iterdir()) == []  # the tmpfs is gone with its namespace; nothing was written here


def test_the_space_watch_says_at_once_when_the_disk_drops_below_the_limit(tmp_path):
    """The watch reads the real free space; a limit above it stands for a disk that filled during the run."""
    import io
    import time

    stream = io.StringIO()
    target = MilvusTarget(str(tmp_path / "x.db"))
    with space_watch(target, stream, min_free=1 << 62, every=0.05):
        deadline = time.monotonic() + 30
        while not stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert stream.getvalue().startswith(f"convrag: warning: the disk holding the Milvus Lite file "
                                        f"{str(tmp_path / 'x.db')!r} is full (")
    assert stream.getvalue().count("\n") == 1  # said once
    quiet = io.StringIO()
    with space_watch(target, quiet, min_free=0, every=0.05):
        time.sleep(0.3)
    assert quiet.getvalue() == ""
