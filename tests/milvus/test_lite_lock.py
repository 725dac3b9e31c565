"""The single-writer lock of a Milvus Lite file: ``<file>.lock`` held with fcntl.flock before Lite starts."""

import os
import subprocess
import sys

import pytest

from llama_index_convrag.milvus.lite_lock import acquire_lite_lock, busy_message, lite_lock_path

#: Imports the lock's module (no Milvus client: about 0.1 against 1.3 CPU-s with ``milvus.client``), says READY,
#: waits for a "go" line, takes the lock; the holder keeps it until its stdin closes (so the other process of a pair
#: always finds it held, however slowly either of them started).
CHILD = """
import sys
from llama_index_convrag.milvus.lite_lock import LiteFileBusyError, acquire_lite_lock
print("READY", flush=True)
sys.stdin.readline()
try:
    acquire_lite_lock(sys.argv[1])
except LiteFileBusyError as exc:
    print("BUSY", exc.pid, flush=True)
    print(exc, file=sys.stderr, flush=True)
    sys.exit(8)
print("HELD", flush=True)
sys.stdin.read()
"""


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def test_lock_path_is_beside_the_file(tmp_path):
    assert lite_lock_path(str(tmp_path / "x.db")) == tmp_path / "x.db.lock"


@pytest.mark.parametrize("pair", range(8))
def test_two_processes_started_together_one_holds_the_other_names_it(tmp_path, pair):
    db = str(tmp_path / f"pair{pair}.db")
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=_env()) for _ in range(2)]
    try:
        assert [p.stdout.readline() for p in procs] == ["READY\n"] * 2  # both imported: released together
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        said = [p.stdout.readline().split() for p in procs]  # each one's outcome, the holder still holding
    finally:
        outs = [p.communicate(timeout=60)[0] for p in procs]  # closes stdin: the holder lets go and exits
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 8] and outs == ["", ""]
    holder = procs[codes.index(0)]
    assert said[codes.index(0)] == ["HELD"] and said[codes.index(8)] == ["BUSY", str(holder.pid)]
    assert (tmp_path / f"pair{pair}.db.lock").read_text() == str(holder.pid)


def test_a_second_take_in_the_same_process_is_a_no_op_and_a_holder_blocks_others(tmp_path):
    db = str(tmp_path / "mine.db")
    acquire_lite_lock(db)
    acquire_lite_lock(db)  # held already: no error
    out = subprocess.run([sys.executable, "-c", CHILD, db], input="go\n", capture_output=True, text=True, env=_env())
    assert out.returncode == 8
    assert out.stdout.split() == ["READY", "BUSY", str(os.getpid())]
    assert out.stderr.strip() == busy_message(db, os.getpid())
    # the holder named with its command line (this test run's: argv[0] may be python or python3, pytest follows)
    assert out.stderr.startswith(f"the Milvus Lite file {db!r} is in use by another process (pid {os.getpid()}: ")
    assert "pytest" in out.stderr.split("; Milvus Lite allows", 1)[0]


def test_cli_exits_8_naming_the_holder_of_the_flock(capsys, tmp_path):
    """The flock alone (Milvus Lite not started by the holder) makes ``ingest`` exit 8 naming the holder's pid."""
    from llama_index_convrag.cli import main

    db = str(tmp_path / "x.db")
    holder = subprocess.Popen([sys.executable, "-c", CHILD, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=_env())
    try:
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.read(len("READY\nHELD\n")) == "READY\nHELD\n"
        (tmp_path / "a.txt").write_text("hello")
        code = main(["ingest", str(tmp_path / "a.txt"), "--uri", db])
        err = capsys.readouterr().err
        assert code == 8
        assert err == f"convrag: error: {busy_message(db, holder.pid)}\n"
        assert f"is in use by another process (pid {holder.pid}: {sys.executable} -c" in err
    finally:
        holder.stdin.close()
        holder.wait()
