"""``startable_task`` / ``eager_task``: a first step taken early runs in the caller's turn, as the new task and in
its context; the rest runs in the task; results, errors and a cancel before the task's own first step reach the
coroutine as in any task; a task left alone runs as any other. On the default loop and on uvloop (the server's)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, Callable, List

import anyio
import pytest
import uvloop

from llama_index_convrag.serve.eager import eager_task, startable_task

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("SEEN", default="caller's")
LOOPS = pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])


@LOOPS
def test_the_first_step_runs_now_as_the_new_task_in_its_own_context(run: Callable[[Any], Any]) -> None:
    async def main() -> None:
        steps: List[Any] = []

        async def job() -> str:
            steps.append(("first", asyncio.current_task()))
            SEEN.set("task's")
            with anyio.CancelScope():  # entered in the early step, left in a later one: the same host task
                await asyncio.sleep(0)
            steps.append(("later", asyncio.current_task(), SEEN.get()))
            return "answer"

        caller = asyncio.current_task()
        task = eager_task(job())
        assert steps == [("first", task)]
        assert asyncio.current_task() is caller and SEEN.get() == "caller's"
        assert await task == "answer"
        assert steps[1] == ("later", task, "task's")

    run(main())


@LOOPS
def test_a_coroutine_ending_in_its_first_step_ends_its_task(run: Callable[[Any], Any]) -> None:
    async def main() -> None:
        async def value() -> int:
            return 7

        async def failure() -> None:
            raise ValueError("bad value 3")

        assert await eager_task(value()) == 7
        with pytest.raises(ValueError, match="bad value 3"):
            await eager_task(failure())

    run(main())


@LOOPS
def test_a_cancel_before_the_tasks_own_step_reaches_the_coroutine_where_it_waits(run: Callable[[Any], Any]) -> None:
    async def main() -> None:
        steps: List[str] = []
        waited = asyncio.get_running_loop().create_future()

        async def job() -> None:
            try:
                steps.append("waiting")
                await waited
            except asyncio.CancelledError:
                steps.append("cancelled")
                raise

        task = eager_task(job())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert steps == ["waiting", "cancelled"] and task.cancelled() and waited.cancelled()

    run(main())


@LOOPS
def test_step_now_runs_once_and_never_after_the_loop_began_the_task_or_a_cancel(run: Callable[[Any], Any]) -> None:
    async def main() -> None:
        steps: List[str] = []

        async def job(name: str) -> None:
            steps.append(name)
            await asyncio.sleep(0)

        task, step_now = startable_task(job("left alone"))
        await asyncio.sleep(0)  # the loop takes its first step
        assert steps == ["left alone"] and step_now() is False
        await task
        early, step_early = startable_task(job("early"))
        assert step_early() is True and step_early() is False and steps[-1] == "early"
        await early
        cancelled, step_cancelled = startable_task(job("never"))
        cancelled.cancel()
        assert step_cancelled() is False
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert "never" not in steps

    run(main())


@LOOPS
def test_when_the_early_wait_is_over_the_tasks_own_first_step_goes_on(run: Callable[[Any], Any]) -> None:
    async def main() -> None:
        steps: List[str] = []
        waited = asyncio.get_running_loop().create_future()

        async def job() -> str:
            steps.append("waiting")
            value = await waited
            steps.append(f"resumed with {value}")
            return value

        task = eager_task(job())
        waited.set_result("ready")  # before the loop reaches the task
        await asyncio.sleep(0)  # one pass: the task's own first step
        assert steps == ["waiting", "resumed with ready"] and task.done() and task.result() == "ready"

    run(main())
