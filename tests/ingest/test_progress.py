import io
import os
import signal
import threading

import pytest

from llama_index_convrag.ingest.progress import (BarProgress, LineProgress, Progress, StopRequest, make_progress,
                                                 stop_on_sigint)


def test_line_progress_writes_counts_when_the_interval_passed():
    stream = io.StringIO()
    p = LineProgress(3, stream=stream, every=1e-9)
    p.file_read()
    p.chunks_stored(128)
    p.file_read()
    lines = stream.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "ingest: 1/3 files read, 0 chunks stored",
        "ingest: 1/3 files read, 128 chunks stored",
        "ingest: 2/3 files read, 128 chunks stored",
    ]
    assert all("chunks/s" in line for line in lines)


def test_line_progress_stays_quiet_within_the_interval():
    stream = io.StringIO()
    p = LineProgress(3, stream=stream, every=3600)
    p.file_read()
    p.chunks_stored(5)
    assert stream.getvalue() == ""
    with pytest.raises(ValueError, match="progress interval must be > 0 seconds, got 0"):
        LineProgress(1, stream=stream, every=0)


def test_make_progress_picks_bar_lines_or_nothing(tmp_path):
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    files[0].write_text("x" * 10)
    files[1].write_text("y" * 30)
    nothing = make_progress(files, show_bar=False, lines_every=None, stream=None)
    assert type(nothing) is Progress and nothing.total_files == 2
    lines = make_progress(files, show_bar=False, lines_every=5, stream=io.StringIO())
    assert isinstance(lines, LineProgress) and lines.total_bytes == 40
    bar = make_progress(files, show_bar=True, lines_every=5, stream=None)
    assert isinstance(bar, BarProgress) and bar.total_bytes == 40
    bar.file_read(files[0].as_posix(), 10, 7)
    bar.chunks_stored({files[0].as_posix(): 7})
    assert bar.chunks == 7 and bar.files == 1 and bar._bar.n == 7 and bar._bar.unit == "chunk"
    assert bar.postfix().startswith("files 1/2, 25% ETA ")
    bar.close()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_share_of_bytes_eta_and_the_large_file_being_stored():
    clock = Clock()
    mb = 1 << 20
    p = LineProgress(3, 4 * mb, stream=io.StringIO(), every=3600, clock=clock)
    p.file_read("/d/small.txt", mb // 2, 0)  # unchanged: done at once
    p.file_read("/d/big.pdf", 3 * mb, 100)
    clock.now += 10
    p.chunks_stored({"/d/big.pdf": 50})
    # 0.5 MB done + half of the 3 MB file = 2 of 4 MB after 10 s: 10 s left
    assert p.fraction() == 0.5 and p.eta() == 10.0
    assert p.line() == ("ingest: 2/3 files read, 50 chunks stored (5.0 chunks/s, 0:10; 50% of 4.0 MB, ETA 0:10; "
                        "now big.pdf (3.0 MB, 50/100 chunks))")
    p.chunks_stored({"/d/big.pdf": 50})
    assert p.large_file() is None and p.fraction() == 3.5 / 4


def test_no_sizes_no_share_and_no_eta_and_small_files_are_not_named():
    clock = Clock()
    p = Progress(2, clock=clock)
    p.file_read("/d/a.txt", 10, 2)
    clock.now += 2
    p.chunks_stored({"/d/a.txt": 1})
    assert p.fraction() is None and p.eta() is None and p.large_file() is None
    assert p.line() == "ingest: 1/2 files read, 1 chunks stored (0.5 chunks/s, 0:02)"


def test_a_run_that_printed_lines_ends_with_one_more_and_a_short_one_prints_none():
    clock = Clock()
    stream = io.StringIO()
    quiet = LineProgress(1, stream=stream, every=10, clock=clock)
    quiet.file_read("/d/a.txt", 1, 0)
    quiet.close()
    assert stream.getvalue() == ""
    long = LineProgress(2, stream=stream, every=10, clock=clock)
    clock.now += 11
    long.file_read("/d/a.txt", 1, 0)
    long.file_read("/d/b.txt", 1, 0)
    long.close()
    assert [line.split(" (")[0] for line in stream.getvalue().splitlines()] == [
        "ingest: 1/2 files read, 0 chunks stored", "ingest: 2/2 files read, 0 chunks stored"]


def test_first_sigint_sets_the_flag_second_raises_and_handler_is_restored():
    before = signal.getsignal(signal.SIGINT)
    stop = StopRequest()
    with stop_on_sigint(stop):
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_outside_the_main_thread_nothing_is_installed():
    seen = []

    def work():
        with stop_on_sigint(StopRequest()) as stop:
            seen.append((stop.requested, signal.getsignal(signal.SIGINT)))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [(False, signal.getsignal(signal.SIGINT))]
