"""Two jobs at once: a side job in a worker thread (or a task) while the caller runs the main one, and the worker
threads a part makes on first use.

A turn recalls earlier messages while it retrieves its evidence (``chat/engine.py``), and a recall embeds its query's
words while its searches run (``memory/episodic.py``): both are :func:`run_beside` / :func:`arun_beside`.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from typing import Any, Awaitable, Callable, Optional, TypeVar

T = TypeVar("T")


class LazyThreads:
    """A pool of ``workers`` threads made on first :meth:`get` (no threads in a constructor); :meth:`close` shuts it
    down, and a later :meth:`get` makes it again."""

    def __init__(self, workers: int, prefix: str) -> None:
        self.workers, self.prefix = workers, prefix
        self._pool: Optional[Executor] = None
        self._lock = threading.Lock()

    def get(self) -> Executor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=self.prefix)
            return self._pool

    def close(self) -> None:
        """Shut the pool down, waiting for its jobs (nothing when it was never made)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def run_beside(main: Callable[[], T], side: Callable[[], Any], threads: Executor) -> T:
    """Run ``side`` in one of ``threads`` (in this thread's context: the instrumentation's spans) while ``main`` runs
    in this thread; ``main``'s result. ``main``'s error is raised (``side`` is cancelled when it has not started, else
    waited for, and its outcome dropped: as if it had never run); else ``side``'s error."""
    future = threads.submit(contextvars.copy_context().run, side)
    try:
        result = main()
    except BaseException:
        if not future.cancel():
            wait([future])
        raise
    future.result()
    return result


async def arun_beside(main: Awaitable[T], side: Awaitable[Any]) -> T:
    """Async twin of :func:`run_beside`: ``side`` runs as a task while ``main`` is awaited; when ``main`` raises
    (or is cancelled) the task is cancelled and its outcome dropped."""
    task = asyncio.ensure_future(side)
    try:
        result = await main
    except BaseException:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    await task
    return result


__all__ = ["LazyThreads", "arun_beside", "run_beside"]
