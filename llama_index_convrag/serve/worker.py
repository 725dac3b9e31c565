"""The process's worker: the name its turn claims are held under, and the lease that keeps them.

At startup the lifespan registers the worker (``ClaimsMixin.register_worker``): the claims of an earlier worker of
the same name (this server before a restart: ``convrag serve`` names it ``host:port``) and of workers whose lease
lapsed are released at once, their unfinished answers marked ``interrupted`` with the text saved so far, so a user can
regenerate right away. While the server runs, :meth:`WorkerLease.run` renews the lease every third of
``limits.lease_s`` (which extends every claim the worker holds) and releases the claims of workers that died without
stopping (their lease lapsed). At shutdown the worker unregisters.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
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
        self._task: Optional["asyncio.Task[None]"] = None

    async def start(self) -> List[str]:
        """Register the worker (``state.worker_id`` set) and start renewing; the conversations freed."""
        released = await self._register()
        if released:
            logger.warning("worker %s: freed %d conversation(s) of a stopped worker; their unfinished answers are "
                           "'interrupted'", self._name, len(released))
        self._task = asyncio.create_task(self.run())
        return released

    async def _register(self) -> List[str]:
        worker, released = await run_in_threadpool(self._state.store.register_worker, self._name,
                                                   self._state.limits.lease_s)
        self._state.worker_id = worker.id
        return released

    async def run(self) -> None:
        """Renew every third of the lease; release lapsed workers' claims (until cancelled)."""
        store, lease_s = self._state.store, self._state.limits.lease_s
        while True:
            await asyncio.sleep(lease_s / 3)
            try:
                worker_id = self._state.worker_id
                if worker_id is None or not await run_in_threadpool(store.renew_worker, worker_id, lease_s):
                    logger.warning("worker %s: its lease lapsed and its claims were released; registering again",
                                   self._name)
                    await self._register()
                await run_in_threadpool(store.release_lapsed_workers)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a store hiccup: the next renewal tries again within the lease
                logger.warning("worker %s: renewing its lease failed", self._name, exc_info=True)

    async def stop(self) -> None:
        """Stop renewing and unregister (claims still held are released, their answers ``interrupted``)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        worker_id, self._state.worker_id = self._state.worker_id, None
        if worker_id is not None:
            await run_in_threadpool(self._state.store.unregister_worker, worker_id)


__all__ = ["WorkerLease", "default_worker_name"]
