"""Tasks whose first step can run at once, in the caller's turn of the event loop (as Python 3.12's eager tasks do).

``loop.create_task`` runs nothing now: the task's first step waits for the loop to reach it, behind everything else
ready to run, which under load is a whole pass over every stream in flight. :func:`startable_task` makes an ordinary
task and a ``step_now`` callable that takes the task's first step right away, in the caller's turn (up to the
coroutine's first real wait: a future not yet done), when the loop has not taken it yet; :func:`eager_task` takes it
at once. During that step the new task is the current task and its own context is the current context, as in any
step of a task (``asyncio.current_task``, cancel scopes and context variables see the task, not the caller). Left
alone, the task runs as any other.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any, Callable, Generator, Optional, Tuple, TypeVar

T = TypeVar("T")


def startable_task(coro: "Coroutine[Any, Any, T]", name: Optional[str] = None
                   ) -> Tuple["asyncio.Task[T]", Callable[[], bool]]:
    """``(a task running coro, step_now)``: ``step_now()`` takes the task's first step now (called from a task of
    the running loop) and returns True, or returns False when the task has begun (or is being cancelled) already."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    started = _Started(coro)
    task = asyncio.Task(started, loop=loop, name=name, context=context)

    def step_now() -> bool:
        if started.begun or task.cancelling():
            return False
        caller = asyncio.current_task(loop)
        if caller is not None:
            asyncio.tasks._leave_task(loop, caller)  # type: ignore[attr-defined]
        asyncio.tasks._enter_task(loop, task)  # type: ignore[attr-defined]
        try:
            context.run(started.first_step)
        finally:
            asyncio.tasks._leave_task(loop, task)  # type: ignore[attr-defined]
            if caller is not None:
                asyncio.tasks._enter_task(loop, caller)  # type: ignore[attr-defined]
        return True

    return task, step_now


def eager_task(coro: "Coroutine[Any, Any, T]", name: Optional[str] = None) -> "asyncio.Task[T]":
    """A task running ``coro``, its first step taken before this returns."""
    task, step_now = startable_task(coro, name)
    step_now()
    return task


class _Started(Coroutine):
    """``coro`` as its task sees it. When :meth:`first_step` took the first step early, the task's own first step
    gets what that step ended with (its result or its exception, or the future ``coro`` waits on; when that future is
    done already, ``coro`` goes on in this step); then, and otherwise, ``coro`` itself."""

    def __init__(self, coro: Coroutine) -> None:
        self._coro = coro
        self.begun = False
        self._held = False  # an early first step's outcome the task has not had yet
        self._yielded: Any = None
        self._error: Optional[BaseException] = None

    def first_step(self) -> None:
        self.begun = True
        try:
            self._yielded = self._coro.send(None)
        except BaseException as e:  # noqa: BLE001 - StopIteration (its result) or an error: the task's first step
            self._error = e
        self._held = True

    def _take_held(self) -> Any:
        self._held = False
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._yielded

    def send(self, value: Any) -> Any:
        self.begun = True
        if self._held:
            waited = self._take_held()
            if waited is None or (isinstance(waited, asyncio.Future) and waited.done()):
                # what the early step waited for is over (or it only gave way): go on now, not a pass later
                if waited is not None:
                    waited._asyncio_future_blocking = False
                return self._coro.send(None)
            return waited
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:  # type: ignore[override]
        self.begun = True
        if self._held:  # cancelled before the task's own first step: the future the early step waits on goes too
            waited = self._take_held()
            if isinstance(waited, asyncio.Future):
                waited.cancel()
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)

    def close(self) -> None:
        self.begun, self._held = True, False
        self._coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        raise TypeError("a startable coroutine runs in its task; await the task")


__all__ = ["eager_task", "startable_task"]
