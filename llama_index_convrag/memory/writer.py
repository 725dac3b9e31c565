"""``BackgroundWriter``: memory writes run after a turn commits, in order, off the turn's path.

:meth:`BackgroundWriter.submit` queues a job and returns at once (a lock and a queue put: what a turn's commit
pays). One worker thread runs the jobs in the order given; it starts with the first job and ends when the queue is
empty, so an idle writer holds no thread. :meth:`flush` waits until every job given so far has run;
:meth:`close` flushes and refuses later jobs. A job that raises is logged (``logging``, with its traceback) and
recorded (:attr:`failures`, the last :data:`KEPT_RECORDS`; :attr:`failed` counts them all); a job refused after
close is recorded the same way: nothing is lost without a word. A job's return value is kept in :attr:`results`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Optional

logger = logging.getLogger(__name__)

#: Records of the last jobs kept (results and failures each).
KEPT_RECORDS = 256


@dataclass(frozen=True)
class WriteFailure:
    """A job that raised (or was refused): its name, the error as text and when."""

    job: str
    error: str
    at: float


@dataclass(frozen=True)
class WriteResult:
    """A job that ran: its name, what it returned, when it was queued and how long it ran."""

    job: str
    value: Any
    queued_at: float
    ms: float


class BackgroundWriter:
    """Runs submitted jobs one at a time in a worker thread (see the module docstring)."""

    def __init__(self, name: str = "convrag-memory-writer") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._queue: Deque[tuple] = deque()
        self._thread: Optional[threading.Thread] = None
        self._running = 0  # jobs taken by the worker, not yet finished
        self._closed = False
        self.failures: Deque[WriteFailure] = deque(maxlen=KEPT_RECORDS)
        self.results: Deque[WriteResult] = deque(maxlen=KEPT_RECORDS)
        self.failed = 0
        self.done = 0

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cond:
            return len(self._queue) + self._running

    def submit(self, job: str, fn: Callable[[], Any]) -> bool:
        """Queue ``fn`` (named ``job`` in the records); False (recorded as a failure) when the writer is closed."""
        with self._cond:
            if self._closed:
                self._fail(job, "the memory writer is closed (engine.close() was called); this write was not made")
                return False
            self._queue.append((job, fn, time.time()))
            if self._thread is None:
                # not a daemon: the interpreter waits for the writes at exit (close() the engine to wait earlier)
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=False)
                self._thread.start()
        return True

    def record_failure(self, job: str, error: str) -> None:
        """Record a part of a job that failed while the job itself went on (logged, in :attr:`failures`)."""
        with self._cond:
            self._fail(job, error)

    def _fail(self, job: str, error: str) -> None:
        logger.warning("memory write %s failed: %s", job, error)
        self.failures.append(WriteFailure(job, error, time.time()))
        self.failed += 1

    def _work(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    self._thread = None
                    self._cond.notify_all()
                    return
                job, fn, queued = self._queue.popleft()
                self._running += 1
            started = time.perf_counter()
            try:
                value = fn()
            except Exception as exc:  # noqa: BLE001 - a failed write is logged and recorded; the next one runs
                logger.exception("memory write %s raised", job)
                with self._cond:
                    self.failures.append(WriteFailure(job, f"{type(exc).__name__}: {exc}", time.time()))
                    self.failed += 1
            else:
                with self._cond:
                    self.results.append(WriteResult(job, value, queued, (time.perf_counter() - started) * 1000))
                    self.done += 1
            finally:
                with self._cond:
                    self._running -= 1

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every job submitted so far has run and the worker has ended; False when ``timeout`` (seconds)
        passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queue or self._running or self._thread is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: Optional[float] = None) -> bool:
        """Refuse new jobs, then :meth:`flush`; True when every job ran within ``timeout``."""
        with self._cond:
            self._closed = True
        return self.flush(timeout)


__all__ = ["BackgroundWriter", "KEPT_RECORDS", "WriteFailure", "WriteResult"]
