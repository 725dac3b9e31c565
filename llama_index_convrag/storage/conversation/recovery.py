"""Abandoned turns: ``pending`` placeholders left by a process that died (``kill -9``, power loss) become
``interrupted``, keeping the text saved so far.

A turn stores the user's question and an empty ``pending`` assistant placeholder before generating, so a crash never
loses the question. Which placeholders are abandoned is known with a lock: every process using a conversation file
holds a shared ``flock`` on ``<file>.lock`` (a :class:`StoreLease`). A process that obtains it *exclusively* knows no
other process is answering, so every ``pending`` placeholder in the file is abandoned and is marked ``interrupted``.
When another process holds the lease, nothing is touched (its placeholders may be streaming right now).
"""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path
from typing import IO, Dict, List, Optional, Tuple

from llama_index_convrag.storage.conversation.base import INTERRUPTED, INTERRUPTED_ERROR, ConversationStore, Message

ABANDONED_ERROR = INTERRUPTED_ERROR

_HELD: Dict[str, "StoreLease"] = {}
_HELD_LOCK = threading.Lock()


class StoreLease:
    """A shared lock on ``<store file>.lock`` held for as long as this process uses the store (POSIX only)."""

    def __init__(self, store_path: Path) -> None:
        self.path = Path(str(store_path) + ".lock")
        self._file: Optional[IO[bytes]] = None

    def acquire(self) -> bool:
        """Take the lease; True when no other process holds it (this one then holds it exclusively, briefly)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab")
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_SH)
            return False
        return True

    def share(self) -> None:
        """Downgrade an exclusive lease to shared (other processes may now use the store too)."""
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_SH)

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def pending_messages(store: ConversationStore) -> List[Message]:
    """Every assistant placeholder still ``pending``, oldest conversation first."""
    return [m for cid in store.list_conversations() for m in store.get_conversation(cid)
            if m.role == "assistant" and m.status == "pending"]


def mark_abandoned(store: ConversationStore, messages: List[Message]) -> None:
    """Finalise ``messages`` as ``interrupted`` (keeping any content they had) with :data:`ABANDONED_ERROR`."""
    for m in messages:
        store.finalize_message(m.id, content=m.content, status=INTERRUPTED, error=ABANDONED_ERROR)


def open_lease(store: ConversationStore, store_path: Path) -> Tuple[StoreLease, List[Message]]:
    """Hold a lease on ``store_path`` for this process and, when no other process uses the file, mark abandoned
    placeholders ``interrupted``. Returns the lease (kept until :func:`release_leases` or exit) and the messages marked.
    """
    key = str(Path(store_path).resolve())
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is not None:  # this process is already a live user of the file
            return held, []
        lease = StoreLease(Path(key))
        alone = lease.acquire()
        _HELD[key] = lease
    recovered: List[Message] = []
    if alone:
        try:
            recovered = pending_messages(store)
            mark_abandoned(store, recovered)
        finally:
            lease.share()
    return lease, recovered


def release_leases() -> None:
    """Release every lease this process holds (tests, long-running notebooks)."""
    with _HELD_LOCK:
        for lease in _HELD.values():
            lease.release()
        _HELD.clear()
