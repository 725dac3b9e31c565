"""The single-writer lock of a Milvus Lite file: an exclusive ``fcntl.flock`` on ``<file>.lock`` taken before Milvus
Lite starts, and the message naming the process that holds it. Imports no Milvus client (a process that only
takes the lock stays light); :mod:`llama_index_convrag.milvus.client` takes it before connecting."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, Optional

from llama_index_convrag.errors import MilvusConnectionError


class LiteFileBusyError(MilvusConnectionError):
    """Another process holds the Milvus Lite file's lock (``<file>.lock``); ``pid`` is that process (None if unknown)."""

    def __init__(self, message: str, pid: Optional[int]) -> None:
        super().__init__(message)
        self.pid = pid


_HELD_LOCKS: Dict[str, int] = {}


def lite_lock_path(uri: str) -> Path:
    """The lock file of a Milvus Lite file: ``<file>.lock`` beside it."""
    path = Path(uri).expanduser()
    return path.with_name(path.name + ".lock")


#: How long a process that found the lock held waits for the holder to write its pid (it takes the lock first).
PID_WAIT_S = 2.0


def _holder_pid(fd: int) -> Optional[int]:
    """The pid written in a held lock file, waiting up to :data:`PID_WAIT_S` for a holder that just took it."""
    deadline = time.monotonic() + PID_WAIT_S
    while True:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit() or time.monotonic() > deadline:
            return int(text) if text.isdigit() else None
        time.sleep(0.02)


def lite_own_lock_holder(uri: str) -> Optional[int]:
    """The pid of another process holding Milvus Lite's own POSIX lock (``.<name>.lock``, taken by a Lite server
    that did not come through :func:`acquire_lite_lock`, e.g. a plain ``MilvusClient``), from ``/proc/locks``;
    None when free or not on Linux."""
    path = Path(uri).expanduser()
    lock = path.resolve().parent / f".{path.name}.lock"
    try:
        inode = str(lock.stat().st_ino)
        with open("/proc/locks", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "POSIX" and parts[5].rsplit(":", 1)[-1] == inode and parts[4].isdigit() \
                and int(parts[4]) != os.getpid():
            return int(parts[4])
    return None


def describe_process(pid: Optional[int]) -> str:
    """``pid N: <command line>`` (``pid N`` when it cannot be read, ``pid unknown`` for None)."""
    if pid is None:
        return "pid unknown"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return f"pid {pid}"
    return f"pid {pid}: {cmd[:120]}" if cmd else f"pid {pid}"


def busy_message(uri: str, pid: Optional[int]) -> str:
    """The one message for a Milvus Lite file held by another process."""
    return (f"the Milvus Lite file {uri!r} is in use by another process ({describe_process(pid)}); Milvus Lite "
            f"allows one process per file: wait for it to finish, use another file, or serve the data to several "
            f"processes (Milvus standalone, or 'milvus-lite server' from Milvus Lite 3.x) at http://HOST:PORT")


def acquire_lite_lock(uri: str) -> None:
    """Hold an exclusive ``fcntl.flock`` on :func:`lite_lock_path` for the life of this process (taken before Milvus
    Lite starts its server, so two processes started at the same instant cannot both open the file); the holder's
    pid is written into it. Raises :class:`LiteFileBusyError` naming the holder's pid when another process holds it,
    or holds Milvus Lite's own lock on the file (:func:`lite_own_lock_holder`)."""
    import fcntl

    path = lite_lock_path(uri)
    key = str(path.resolve())
    if key in _HELD_LOCKS:
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _holder_pid(fd)
        os.close(fd)
        raise LiteFileBusyError(busy_message(uri, pid), pid) from None
    other = lite_own_lock_holder(uri)
    if other is not None:
        os.close(fd)  # releases the flock
        raise LiteFileBusyError(busy_message(uri, other), other)
    os.ftruncate(fd, 0)  # then one small write: a reader sees nothing (and waits) or the whole pid, never a mix
    os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
    _HELD_LOCKS[key] = fd  # kept open: the OS releases the lock when this process ends


def release_lite_lock(uri: str) -> None:
    """Give up this process' lock on a Lite file (after its client is closed), e.g. before removing the file."""
    fd = _HELD_LOCKS.pop(str(lite_lock_path(uri).resolve()), None)
    if fd is not None:
        os.close(fd)


__all__ = ["PID_WAIT_S", "LiteFileBusyError", "acquire_lite_lock", "busy_message", "describe_process",
           "lite_lock_path", "lite_own_lock_holder", "release_lite_lock"]
