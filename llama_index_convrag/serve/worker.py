"""The process's worker: the name its turn claims are held under, and the lease that keeps them.

At startup the lifespan registers the worker (``ClaimsMixin.register_worker``): the claims of an earlier worker of
the same name (this server before a restart: ``convrag serve`` names it ``host:port``) and of workers whose lease
lapsed are released at once, their unfinished answers marked ``interrupted`` with the text saved so far, so a user can
regenerate right away. While the server runs, a thread of its own renews the lease every third of ``limits.lease_s``
(which extends every claim the worker holds) and releases the claims of workers that died without stopping (their
lease lapsed). The renewals run beside the event loop and its thread pool, not on them, so an overloaded server does
not let its own lease lapse while its turns queue. At shutdown the worker unregisters.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import List, Optional

from starlette.concurrency import run_in_threadpool

from llama_index_convrag.serve.state import ServeState

logger = logging.getLogger(__name__)


def default_worker_name() -> str:
    """``host:pid``: unique to this process (its claims are freed when its lease lapses, not at a restart)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class WorkerLease:
    """Registers ``state``'s worker, renews its lease and sweeps lapsed workers (see the module docstring)."""

    def __init__(self, state: ServeState) -> None:
        self._state = state
        self._name = state.worker_name if state.worker_name is not None else default_worker_name()
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None

    async def start(self) -> List[str]:
        """Register the worker (``state.worker_id`` set) and start renewing; the conversations freed."""
        released = await run_in_threadpool(self._register)
        if released:
            logger.warning("worker %s: freed %d conversation(s) of a stopped worker; their unfinished answers are "
                           "'interrupted'", self._name, len(released))
        self._stopping.clear()
        self._thread = threading.Thread(target=self.run, name=f"convrag-lease-{self._name}", daemon=True)
        self._thread.start()
        return released

    def _register(self) -> List[str]:
        worker, released = self._state.store.register_worker(self._name, self._state.limits.lease_s)
        self._state.worker_id = worker.id
        return released

    def run(self) -> None:
        """Renew every third of the lease and release lapsed workers' claims, until :meth:`stop` (blocking)."""
        store, lease_s = self._state.store, self._state.limits.lease_s
        while not self._stopping.wait(lease_s / 3):
            try:
                worker_id = self._state.worker_id
                if worker_id is None or not store.renew_worker(worker_id, lease_s):
                    logger.warning("worker %s: its lease lapsed and its claims were released; registering again",
                                   self._name)
                    self._register()
                store.release_lapsed_workers()
            except Exception:  # noqa: BLE001 - a store hiccup: the next renewal tries again within the lease
                logger.warning("worker %s: renewing its lease failed", self._name, exc_info=True)

    async def stop(self) -> None:
        """Stop renewing and unregister (claims still held are released, their answers ``interrupted``)."""
        thread, self._thread = self._thread, None
        self._stopping.set()
        if thread is not None:
            await run_in_threadpool(thread.join)
        worker_id, self._state.worker_id = self._state.worker_id, None
        if worker_id is not None:
            await run_in_threadpool(self._state.store.unregister_worker, worker_id)


__all__ = ["WorkerLease", "default_worker_name"]
