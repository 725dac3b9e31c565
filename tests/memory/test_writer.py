"""``BackgroundWriter``: one key's jobs in order on one lane while other keys run beside them, flush, and close
within a bounded wait that records (never silently loses) the jobs it drops."""

from __future__ import annotations

import logging
import threading
from typing import Dict, List

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.writer import BackgroundWriter, lane_of


def test_lane_of_is_stable_and_in_range() -> None:
    assert lane_of("alice\x00c1", 4) == lane_of("alice\x00c1", 4)
    assert {lane_of(f"k{i}", 4) for i in range(64)} == {0, 1, 2, 3}
    assert lane_of("anything", 1) == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_workers_are_checked(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"workers must be an int >= 1 .*got " + repr(bad).replace(".", r"\.")):
        BackgroundWriter(workers=bad)  # type: ignore[arg-type]


def test_each_keys_jobs_run_in_order_and_one_at_a_time_under_concurrency() -> None:
    writer = BackgroundWriter(workers=3)
    seen: Dict[str, List[int]] = {}
    running: Dict[str, int] = {}
    overlap: List[str] = []
    lock = threading.Lock()

    def job(key: str, n: int) -> None:
        with lock:
            running[key] = running.get(key, 0) + 1
            if running[key] > 1:
                overlap.append(key)
        threading.Event().wait(0.0005)
        with lock:
            seen.setdefault(key, []).append(n)
            running[key] -= 1

    keys = [f"owner\x00c{i}" for i in range(8)]

    def submitter(key: str) -> None:
        for n in range(25):
            assert writer.submit(f"{key} {n}", lambda key=key, n=n: job(key, n), key=key)

    threads = [threading.Thread(target=submitter, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert writer.flush(30) and writer.pending == 0
    assert seen == {k: list(range(25)) for k in keys} and not overlap
    assert writer.done == 200 and writer.failed == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("convrag-memory-writer")]


def test_a_slow_conversation_does_not_hold_up_another_lane() -> None:
    writer = BackgroundWriter(workers=2)
    slow, fast = "a", next(k for k in (f"k{i}" for i in range(50)) if lane_of(k, 2) != lane_of("a", 2))
    release, fast_done = threading.Event(), threading.Event()
    writer.submit("slow", release.wait, key=slow)
    writer.submit("fast", fast_done.set, key=fast)
    assert fast_done.wait(10), "a job of another lane waited for the slow one"
    release.set()
    assert writer.flush(10)


def test_close_waits_then_drops_and_records_what_it_did_not_run(caplog: pytest.LogCaptureFixture) -> None:
    writer = BackgroundWriter(workers=1)
    release = threading.Event()
    ran: List[str] = []
    writer.submit("turn m1", lambda: (release.wait(10), ran.append("m1")), key="c")
    writer.submit("turn m2", lambda: ran.append("m2"), key="c")
    writer.submit("turn m3", lambda: ran.append("m3"), key="c")
    with caplog.at_level(logging.WARNING, logger="llama_index_convrag.memory.writer"):
        assert writer.close(0.05) is False
    release.set()
    assert writer.flush(10)
    assert ran == ["m1"] and writer.dropped == 2 and writer.pending == 0
    assert [f.job for f in writer.failures] == ["turn m2", "turn m3"]
    assert writer.failures[0].error.startswith("not run: the writer closed after waiting 0.05 s")
    assert "2 writes not run: turn m2, turn m3" in caplog.text
    assert writer.submit("turn m4", lambda: None) is False  # closed: refused and recorded
    assert writer.failures[-1].job == "turn m4" and writer.failed == 3


def test_close_within_the_wait_runs_everything() -> None:
    writer = BackgroundWriter(workers=2)
    ran: List[int] = []
    for n in range(10):
        writer.submit(f"j{n}", lambda n=n: ran.append(n), key=f"k{n % 3}")
    assert writer.close(30) is True and sorted(ran) == list(range(10)) and writer.dropped == 0


def test_a_job_that_raises_is_recorded_and_the_next_runs() -> None:
    writer = BackgroundWriter(workers=2)
    writer.submit("bad", lambda: 1 / 0, key="c")
    writer.submit("good", lambda: 7, key="c")
    assert writer.flush(10)
    [failure] = writer.failures
    assert failure.job == "bad" and failure.error.startswith("ZeroDivisionError")
    assert [(r.job, r.value) for r in writer.results] == [("good", 7)]
