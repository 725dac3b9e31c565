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


def test_make_progress_picks_bar_lines_or_nothing(capsys):
    assert type(make_progress(2, show_bar=False, lines_every=None, stream=None)) is Progress
    assert isinstance(make_progress(2, show_bar=False, lines_every=5, stream=io.StringIO()), LineProgress)
    bar = make_progress(2, show_bar=True, lines_every=5, stream=None)
    assert isinstance(bar, BarProgress)
    bar.chunks_stored(7)
    bar.file_read()
    assert bar.chunks == 7 and bar.files == 1 and bar._bar.n == 7 and bar._bar.unit == "chunk"
    bar.close()


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
