"""Progress and interruption of an ingest run.

* :func:`make_progress` picks how a run reports: a bar counting *chunks stored* (files read as a postfix) for a
  person at a terminal, one plain line every ``every`` seconds for logs and pipes, or nothing.
* :class:`StopRequest` + :func:`stop_on_sigint`: the first Ctrl-C asks the run to stop at the next batch boundary
  (between embedding sub-batches, so within about a second); a second Ctrl-C interrupts at once.
* :class:`IngestInterrupted` (a ``KeyboardInterrupt``) carries the report of what was kept.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from typing import Any, Iterator, Optional, TextIO

from tqdm.auto import tqdm
from llama_index_convrag.errors import ConfigurationError


class IngestInterrupted(KeyboardInterrupt):
    """An ingest run stopped by SIGINT; ``report`` says what was stored and what re-running will redo."""

    def __init__(self, report: Any) -> None:
        super().__init__(str(report))
        self.report = report


class StopRequest:
    """A flag the ingest loop checks between batches."""

    def __init__(self) -> None:
        self.requested = False

    def request(self) -> None:
        self.requested = True


@contextlib.contextmanager
def stop_on_sigint(stop: StopRequest) -> Iterator[StopRequest]:
    """While inside, SIGINT sets ``stop.requested`` (a second one raises ``KeyboardInterrupt`` at once).

    Signal handlers can only be installed from the main thread; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: Any) -> None:
        if stop.requested:
            raise KeyboardInterrupt
        stop.request()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


class Progress:
    """No output; the base of the reporters. Counts files read and chunks stored."""

    def __init__(self, total_files: int) -> None:
        self.total_files = total_files
        self.files = 0
        self.chunks = 0
        self.started = time.monotonic()

    def file_read(self) -> None:
        self.files += 1
        self._changed()

    def chunks_stored(self, n: int) -> None:
        self.chunks += n
        self._changed()

    def _changed(self) -> None:
        pass

    def close(self) -> None:
        pass


class BarProgress(Progress):
    """A tqdm bar of chunks stored, with ``files=read/total`` as its postfix."""

    def __init__(self, total_files: int) -> None:
        super().__init__(total_files)
        self._bar = tqdm(unit="chunk", desc="ingest")
        self._bar.set_postfix_str(f"files {self.files}/{self.total_files}")

    def chunks_stored(self, n: int) -> None:
        self._bar.update(n)
        super().chunks_stored(n)

    def _changed(self) -> None:
        self._bar.set_postfix_str(f"files {self.files}/{self.total_files}", refresh=False)

    def close(self) -> None:
        self._bar.close()


class LineProgress(Progress):
    """One line every ``every`` seconds on ``stream`` (a log file, a pipe, CI output)."""

    def __init__(self, total_files: int, *, stream: TextIO, every: float) -> None:
        super().__init__(total_files)
        if every <= 0:
            raise ConfigurationError(f"progress interval must be > 0 seconds, got {every!r}")
        self.stream = stream
        self.every = every
        self._last = self.started

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.chunks / elapsed if elapsed > 0 else 0.0
        return (f"ingest: {self.files}/{self.total_files} files read, {self.chunks} chunks stored "
                f"({rate:.1f} chunks/s, {elapsed:.0f} s)")

    def _changed(self) -> None:
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self.stream.write(self.line() + "\n")
            self.stream.flush()


def make_progress(total_files: int, *, show_bar: bool, lines_every: Optional[float],
                  stream: Optional[TextIO]) -> Progress:
    """The bar when ``show_bar``, else periodic lines when ``lines_every`` is set, else no output."""
    if show_bar:
        return BarProgress(total_files)
    if lines_every is not None:
        if stream is None:
            stream = sys.stderr
        return LineProgress(total_files, stream=stream, every=lines_every)
    return Progress(total_files)
