"""Progress and interruption of an ingest run.

* :func:`make_progress` picks how a run reports: a bar counting *chunks stored* for a person at a terminal, one
  plain line every ``every`` seconds for logs and pipes, or nothing. Both show files read, chunks stored, the rate,
  the share of the bytes done with an ETA, and the large file being stored, if any.
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
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TextIO, Union

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


#: A file at least this large is named in the progress display while its chunks are being stored.
LARGE_FILE_BYTES = 1 << 20


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mb(n: float) -> str:
    return f"{n / (1 << 20):.1f} MB"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """No output; the base of the reporters. Counts files read and chunks stored, the bytes of the files finished
    (skipped, or all their chunks stored) for the ETA, and the large files in flight. Thread-safe: chunks are
    reported by the writer thread."""

    def __init__(self, total_files: int, total_bytes: int = 0, *, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.total_files = total_files
        self.total_bytes = total_bytes
        self.files = 0
        self.chunks = 0
        self.bytes_done = 0.0
        self.clock = clock
        self.started = clock()
        self._open: Dict[str, List[int]] = {}  # doc id -> [size, chunks expected, chunks stored]
        self._lock = threading.Lock()

    def file_read(self, doc_id: str = "", size: int = 0, chunks: int = 0) -> None:
        """A file was read and split into ``chunks`` chunks (0: skipped, finished now)."""
        with self._lock:
            self.files += 1
            if chunks:
                self._open[doc_id] = [size, chunks, 0]
            else:
                self.bytes_done += size
        self._changed()

    def chunks_stored(self, counts: Union[int, Mapping[str, int]]) -> None:
        """Chunks stored, per document id (or a plain count)."""
        with self._lock:
            if isinstance(counts, int):
                self.chunks += counts
            else:
                for doc_id, n in counts.items():
                    self.chunks += n
                    state = self._open.get(doc_id)
                    if state is None:
                        continue
                    state[2] += n
                    if state[2] >= state[1]:
                        self.bytes_done += state[0]
                        del self._open[doc_id]
        self._changed()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def fraction(self) -> Optional[float]:
        """Share of the bytes done (a file being stored counts by its chunks stored); None without sizes."""
        if self.total_bytes <= 0:
            return None
        partial = sum(size * stored / expected for size, expected, stored in self._open.values())
        return min(1.0, (self.bytes_done + partial) / self.total_bytes)

    def eta(self) -> Optional[float]:
        """Seconds left at the rate so far, or None before anything is done."""
        done = self.fraction()
        if not done:
            return None
        return self.elapsed() * (1 - done) / done

    def large_file(self) -> Optional[str]:
        """The largest file of at least :data:`LARGE_FILE_BYTES` whose chunks are being stored, with its progress."""
        big = [(size, doc_id, expected, stored) for doc_id, (size, expected, stored) in self._open.items()
               if size >= LARGE_FILE_BYTES]
        if not big:
            return None
        size, doc_id, expected, stored = max(big)
        return f"{Path(doc_id).name} ({_mb(size)}, {stored}/{expected} chunks)"

    def line(self) -> str:
        """``ingest: F/T files read, C chunks stored (R chunks/s, elapsed; P% of B, ETA; large file)``."""
        with self._lock:
            elapsed = self.elapsed()
            rate = self.chunks / elapsed if elapsed > 0 else 0.0
            parts = [f"{rate:.1f} chunks/s, {_duration(elapsed)}"]
            done, eta, big = self.fraction(), self.eta(), self.large_file()
            if done is not None:
                parts.append(f"{done:.0%} of {_mb(self.total_bytes)}"
                             + (f", ETA {_duration(eta)}" if eta is not None else ""))
            if big is not None:
                parts.append(f"now {big}")
            return (f"ingest: {self.files}/{self.total_files} files read, {self.chunks} chunks stored "
                    f"({'; '.join(parts)})")

    def _changed(self) -> None:
        pass

    def close(self) -> None:
        pass


class BarProgress(Progress):
    """A tqdm bar of chunks stored; its postfix: files read, share of bytes done, ETA, the large file in flight."""

    def __init__(self, total_files: int, total_bytes: int = 0) -> None:
        super().__init__(total_files, total_bytes)
        self._bar = tqdm(unit="chunk", desc="ingest")
        self._changed()

    def chunks_stored(self, counts: Union[int, Mapping[str, int]]) -> None:
        self._bar.update(counts if isinstance(counts, int) else sum(counts.values()))
        super().chunks_stored(counts)

    def postfix(self) -> str:
        with self._lock:
            parts = [f"files {self.files}/{self.total_files}"]
            done, eta, big = self.fraction(), self.eta(), self.large_file()
            if done is not None:
                parts.append(f"{done:.0%}" + (f" ETA {_duration(eta)}" if eta is not None else ""))
            if big is not None:
                parts.append(big)
            return ", ".join(parts)

    def _changed(self) -> None:
        self._bar.set_postfix_str(self.postfix(), refresh=False)

    def close(self) -> None:
        self._bar.close()


class LineProgress(Progress):
    """One line every ``every`` seconds on ``stream`` (a log file, a pipe, CI output), and a last one at close."""

    def __init__(self, total_files: int, total_bytes: int = 0, *, stream: TextIO, every: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(total_files, total_bytes, clock=clock)
        if every <= 0:
            raise ConfigurationError(f"progress interval must be > 0 seconds, got {every!r}")
        self.stream = stream
        self.every = every
        self._last = self.started

    def _changed(self) -> None:
        now = self.clock()
        if now - self._last >= self.every:
            self._last = now
            self._write()

    def _write(self) -> None:
        self.stream.write(self.line() + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._last != self.started:  # a run long enough to have printed a line ends with the final counts
            self._write()


def make_progress(files: Sequence[Path], *, show_bar: bool, lines_every: Optional[float],
                  stream: Optional[TextIO]) -> Progress:
    """The bar when ``show_bar``, else periodic lines when ``lines_every`` is set, else no output (sizes of ``files``
    are read only for a display)."""
    if show_bar:
        return BarProgress(len(files), sum(_size(f) for f in files))
    if lines_every is not None:
        if stream is None:
            stream = sys.stderr
        return LineProgress(len(files), sum(_size(f) for f in files), stream=stream, every=lines_every)
    return Progress(len(files))
