"""``run_beside`` / ``arun_beside``: the side job runs at the same time as the main one, and which error a turn
raises when either fails (exact outcomes; the concurrency is shown by two jobs that each wait for the other)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, List

import pytest

from llama_index_convrag._beside import LazyThreads, arun_beside, run_beside

WAIT = 10.0  # seconds a job waits for the other before the test fails (they run at once: no wait in practice)
where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="unset")


@pytest.fixture()
def threads() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(2, thread_name_prefix="beside-test")
    yield pool
    pool.shutdown(wait=True)


def test_both_run_at_once_and_the_side_job_sees_the_callers_context(threads: ThreadPoolExecutor) -> None:
    main_in, side_in = threading.Event(), threading.Event()
    seen: List[str] = []

    def side() -> None:
        side_in.set()
        seen.append(f"{threading.current_thread().name.split('_')[0]} {where.get()}")
        assert main_in.wait(WAIT), "the main job never ran while the side job did"

    def main() -> None:
        main_in.set()
        assert side_in.wait(WAIT), "the side job never ran while the main job did"

    where.set("turn")
    run_beside(main, side, threads)
    assert seen == ["beside-test turn"]


def test_the_main_jobs_error_wins_and_the_side_job_is_waited_for(threads: ThreadPoolExecutor) -> None:
    started, done = threading.Event(), []

    def side() -> None:
        started.set()
        done.append("side")
        raise RuntimeError("side failed")

    def main() -> None:
        assert started.wait(WAIT)
        raise ConnectionError("main failed")

    with pytest.raises(ConnectionError, match="main failed"):
        run_beside(main, side, threads)
    assert done == ["side"]


def test_the_side_jobs_error_is_raised_after_the_main_job(threads: ThreadPoolExecutor) -> None:
    ran: List[str] = []

    def side() -> None:
        raise RuntimeError("side failed")

    with pytest.raises(RuntimeError, match="side failed"):
        run_beside(lambda: ran.append("main"), side, threads)
    assert ran == ["main"]


def test_async_both_run_at_once_and_errors_as_in_sync() -> None:
    async def go() -> List[str]:
        main_in, side_in = asyncio.Event(), asyncio.Event()
        log: List[str] = []

        async def side() -> None:
            side_in.set()
            await asyncio.wait_for(main_in.wait(), WAIT)
            log.append("side")

        async def main() -> None:
            main_in.set()
            await asyncio.wait_for(side_in.wait(), WAIT)
            log.append("main")

        await arun_beside(main(), side())

        async def slow_side() -> None:
            try:
                await asyncio.sleep(WAIT)
            except asyncio.CancelledError:
                log.append("side cancelled")
                raise

        async def failing_main() -> None:
            await asyncio.sleep(0)  # the side task starts
            raise ConnectionError("main failed")

        with pytest.raises(ConnectionError, match="main failed"):
            await arun_beside(failing_main(), slow_side())

        async def failing_side() -> None:
            raise RuntimeError("side failed")

        async def ok_main() -> None:
            await asyncio.sleep(0)
            log.append("main ok")

        with pytest.raises(RuntimeError, match="side failed"):
            await arun_beside(ok_main(), failing_side())
        return log

    assert asyncio.run(go()) == ["main", "side", "side cancelled", "main ok"]


def test_lazy_threads_are_made_on_first_use_and_again_after_close() -> None:
    lazy = LazyThreads(2, "lazy-test")
    assert lazy._pool is None  # no threads before the first use
    first = lazy.get()
    assert lazy.get() is first
    assert first.submit(lambda: threading.current_thread().name).result().startswith("lazy-test")
    lazy.close()
    assert lazy._pool is None
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        first.submit(print)
    again = lazy.get()
    assert again is not first and again.submit(lambda: 7).result() == 7
    lazy.close()
    lazy.close()  # closing a closed pool does nothing


def test_run_beside_returns_the_main_jobs_result(threads: ThreadPoolExecutor) -> None:
    assert run_beside(lambda: 41 + 1, lambda: None, threads) == 42

    async def main() -> str:
        return "main"

    async def side() -> None:
        return None

    assert asyncio.run(arun_beside(main(), side())) == "main"
