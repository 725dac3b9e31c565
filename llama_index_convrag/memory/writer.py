"""``BackgroundWriter``: memory writes run after a turn commits, off the turn's path, in order per conversation.

:meth:`BackgroundWriter.submit` queues a job under a ``key`` (a conversation) and returns at once (a lock and a
queue put: what a turn's commit pays). ``workers`` lanes run the jobs; a key always goes to the same lane
(:func:`lane_of`, a stable hash), so one conversation's writes run one at a time in the order given while other
conversations' writes run beside them. A lane's thread starts with its first job and ends when its queue is empty,
so an idle writer holds no thread. :meth:`flush` waits until every job given so far has run; :meth:`close` refuses
later jobs, waits at most its ``timeout`` and then drops the jobs still queued, logging and recording each by name
(they are recovered later: a conversation's next turn indexes the messages its recall rows lack, and the next fold
takes every message the summary does not cover). A job that raises is logged (with its traceback) and recorded
(:attr:`failures`, the last :data:`KEPT_RECORDS`; :attr:`failed` counts them all); a job refused after close is
recorded the same way: nothing is lost without a word. A job's return value is kept in :attr:`results`.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, List, Optional

from llama_index_convrag.errors import ConfigurationError

logger = logging.getLogger(__name__)

#: Records of the last jobs kept (results and failures each).
KEPT_RECORDS = 256


@dataclass(frozen=True)
class WriteFailure:
    """A job that raised (or was refused, or dropped at close): its name, the error as text and when."""

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


def lane_of(key: str, workers: int) -> int:
    """The lane of ``key`` among ``workers`` (CRC-32: the same in every process, unlike ``hash``)."""
    return zlib.crc32(key.encode("utf-8")) % workers


class _Lane:
    """One worker's queue and thread (guarded by the writer's condition)."""

    def __init__(self) -> None:
        self.queue: Deque[tuple] = deque()
        self.thread: Optional[threading.Thread] = None
        self.running = 0


class BackgroundWriter:
    """Runs submitted jobs in ``workers`` threads, one key's jobs in order on one of them (see the module
    docstring)."""

    def __init__(self, name: str = "convrag-memory-writer", workers: int = 1) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigurationError(f"workers must be an int >= 1 (writer threads), got {workers!r}")
        self._name = name
        self._cond = threading.Condition()
        self._lanes = [_Lane() for _ in range(workers)]
        self._closed = False
        self.failures: Deque[WriteFailure] = deque(maxlen=KEPT_RECORDS)
        self.results: Deque[WriteResult] = deque(maxlen=KEPT_RECORDS)
        self.failed = 0
        self.done = 0
        self.dropped = 0

    @property
    def workers(self) -> int:
        return len(self._lanes)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cond:
            return sum(len(lane.queue) + lane.running for lane in self._lanes)

    def submit(self, job: str, fn: Callable[[], Any], key: Optional[str] = None) -> bool:
        """Queue ``fn`` (named ``job`` in the records) on the lane of ``key`` (``None``: of ``job``); False
        (recorded as a failure) when the writer is closed."""
        with self._cond:
            if self._closed:
                self._fail(job, "the memory writer is closed (engine.close() was called); this write was not made")
                return False
            n = lane_of(job if key is None else key, len(self._lanes))
            lane = self._lanes[n]
            lane.queue.append((job, fn, time.time()))
            if lane.thread is None:
                # not a daemon: the interpreter waits for the writes at exit (close() the engine to wait earlier)
                name = self._name if len(self._lanes) == 1 else f"{self._name}-{n}"
                lane.thread = threading.Thread(target=self._work, args=(lane,), name=name, daemon=False)
                lane.thread.start()
        return True

    def record_failure(self, job: str, error: str) -> None:
        """Record a part of a job that failed while the job itself went on (logged, in :attr:`failures`)."""
        with self._cond:
            self._fail(job, error)

    def _fail(self, job: str, error: str) -> None:
        logger.warning("memory write %s failed: %s", job, error)
        self.failures.append(WriteFailure(job, error, time.time()))
        self.failed += 1

    def _work(self, lane: _Lane) -> None:
        while True:
            with self._cond:
                if not lane.queue:
                    lane.thread = None
                    self._cond.notify_all()
                    return
                job, fn, queued = lane.queue.popleft()
                lane.running += 1
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
                    lane.running -= 1

    def _busy(self) -> bool:
        return any(lane.queue or lane.running or lane.thread is not None for lane in self._lanes)

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every job submitted so far has run and the workers have ended; False when ``timeout``
        (seconds) passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._busy():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: Optional[float] = None) -> bool:
        """Refuse new jobs, then :meth:`flush`; the jobs still queued when ``timeout`` (seconds) has passed are
        dropped, each logged and recorded as a failure (the jobs running then finish on their threads). True when
        every job ran."""
        with self._cond:
            self._closed = True
        if self.flush(timeout):
            return True
        with self._cond:
            dropped: List[str] = [job for lane in self._lanes for job, _, _ in lane.queue]
            for lane in self._lanes:
                lane.queue.clear()
            for job in dropped:
                self._fail(job, f"not run: the writer closed after waiting {timeout} s; a conversation's next turn "
                                f"indexes what its recall lacks and the next fold takes what the summary lacks")
            self.dropped += len(dropped)
        if dropped:
            logger.error("memory writer closed with %d writes not run: %s", len(dropped), ", ".join(dropped))
        return False


__all__ = ["BackgroundWriter", "KEPT_RECORDS", "WriteFailure", "WriteResult", "lane_of"]
