"""A streamed turn's event log: the events as clients get them, numbered, kept, and read by any number of readers.

:class:`TurnLog` starts the turn's events in their own task as soon as it is made (a turn's retrieval begins while
its response is being set up; :meth:`TurnLog.begin` reads the first one, a turn's ``start``, in the caller's task
first, so the response sends it without waiting for the loop to reach that task). The first reader that has to wait
for the next event takes the task's first step itself when the loop has not taken it yet (``eager.startable_task``):
the turn's engine begins in the reader's turn of the loop, after the response sent what the log holds, rather than
after a pass of the loop over every other stream in flight. The log merges text deltas per window (a delta goes out
at once when the last one went out at least ``window_s`` ago, else with the text that arrived until then: one event,
not one per token), numbers each event from 1 and keeps it. A reader (:meth:`TurnLog.reader`) follows the log from
any event id: a client that lost its connection reads on from its ``Last-Event-ID``, the deltas it missed merged into
one. The log holds the turn's non-text events and its text once (the answer's size); :attr:`TurnLog.text` is the text
streamed so far.

When the last reader leaves a turn that is still answering, the turn goes on for ``grace_s`` seconds (a reader may
come back) and is then cancelled, which stores the answer ``cancelled`` with its text so far; ``grace_s = 0``
cancels at once. :meth:`TurnLog.cancel` stops it now. :class:`TurnLogs` finds a turn's log by its assistant message
id while it runs and for ``keep_s`` seconds after.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

import anyio

from llama_index_convrag.serve.eager import startable_task

logger = logging.getLogger(__name__)
Event = Tuple[str, Dict[str, Any]]
#: an event as the log keeps it: (id, name, data)
Entry = Tuple[int, str, Dict[str, Any]]


class TurnLog:
    """See the module docstring. ``events``: the turn's ``(name, data)`` pairs (``turns.turn_events``)."""

    def __init__(self, events: AsyncIterator[Event], window_s: float, grace_s: float = 0.0,
                 first: Optional[Event] = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._window_s, self._grace_s = window_s, grace_s
        self._entries: List[Entry] = []
        self._held: List[str] = []
        self._last_delta = float("-inf")
        self._window_timer: Optional[asyncio.TimerHandle] = None
        self._grace_timer: Optional[asyncio.TimerHandle] = None
        self._waiters: List[asyncio.Future] = []  # one per reader waiting for the next event
        self._readers = 0
        self.done = False
        self._events = events
        if first is not None:  # read by the caller (:meth:`begin`): kept before the task runs
            self._entries.append((1, *first))
        self._task, self._step_now = startable_task(self._pump(events))

    @classmethod
    async def begin(cls, events: AsyncIterator[Event], window_s: float, grace_s: float = 0.0) -> "TurnLog":
        """A log whose first event is read now, in the caller's task, and kept before the rest start in their own:
        a response made next sends it without waiting for the loop to reach the turn's task (a turn's ``start``, the
        ids, needs no await)."""
        try:
            first: Optional[Event] = await events.__anext__()
        except StopAsyncIteration:
            first = None
        return cls(events, window_s, grace_s, first)

    # --- what the log holds ----------------------------------------------------------------------------------
    @property
    def last_id(self) -> int:
        return len(self._entries)

    def entries(self) -> List[Entry]:
        """Every event kept so far, as it was numbered (a reader behind gets runs of deltas merged)."""
        return list(self._entries)

    @property
    def text(self) -> str:
        """The answer text streamed so far (the deltas kept, and any held for the window)."""
        return "".join([d["text"] for _, name, d in self._entries if name == "delta"] + self._held)

    def _append(self, name: str, data: Dict[str, Any]) -> None:
        self._entries.append((len(self._entries) + 1, name, data))
        self._wake()

    def _wake(self) -> None:
        if not self._waiters:
            return
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(True)

    def _flush(self) -> None:
        if self._window_timer is not None:
            self._window_timer.cancel()
            self._window_timer = None
        if self._held:
            text = "".join(self._held)
            self._held.clear()
            self._last_delta = time.monotonic()
            self._append("delta", {"text": text})

    def _hold(self, text: str) -> None:
        now = time.monotonic()  # per delta: the clock itself (the window's timer takes a delay, not a time)
        if not self._held and now - self._last_delta >= self._window_s:
            self._last_delta = now
            self._append("delta", {"text": text})
            return
        self._held.append(text)
        if self._window_timer is None:
            self._window_timer = self._loop.call_later(self._last_delta + self._window_s - now, self._flush)

    async def _pump(self, events: AsyncIterator[Event]) -> None:
        try:
            async for name, data in events:
                if name == "delta" and self._window_s > 0:
                    self._hold(data["text"])
                else:
                    self._flush()
                    self._append(name, data)
        except asyncio.CancelledError:
            pass
        except Exception:  # the turn's own errors are events; anything else is a bug: logged, the log ends
            logger.exception("a turn's event stream failed")
        finally:
            self._flush()
            self.done = True
            if self._grace_timer is not None:
                self._grace_timer.cancel()
            self._wake()

    # --- readers -----------------------------------------------------------------------------------------------
    def reader(self) -> "Reader":
        """A reader, attached now (the turn keeps answering while one is attached); close it when done."""
        self._readers += 1
        if self._grace_timer is not None:
            self._grace_timer.cancel()
            self._grace_timer = None
        return Reader(self)

    async def _detached(self) -> None:
        self._readers -= 1
        if self._readers > 0 or self.done:
            return
        if self._grace_s <= 0:
            await self.cancel()
        else:
            self._grace_timer = self._loop.call_later(self._grace_s, self._cancel_soon)

    def _cancel_soon(self) -> None:
        self._grace_timer = None
        if self._readers == 0:
            self._loop.create_task(self.cancel())

    async def cancel(self) -> None:
        """Stop the turn now and wait for its cleanup (the answer stored ``cancelled`` with its text so far)."""
        if not self._task.done():
            self._task.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.gather(self._task, return_exceptions=True)
            close = getattr(self._events, "aclose", None)
            if close is not None:  # cancelled before its task first ran: the events' own cleanup runs here
                await close()
        if not self.done:  # (the task never ran: its readers end here)
            self.done = True
            self._wake()

    async def wait(self) -> None:
        """Until the turn has ended (its last event is in the log)."""
        with anyio.CancelScope(shield=True):
            await asyncio.gather(self._task, return_exceptions=True)

    async def _follow(self, after: int, ping_s: Optional[float]) -> AsyncIterator[Optional[Entry]]:
        entries = self._entries  # appended to in place, never replaced
        position = max(0, min(after, len(entries)))
        silence = None if ping_s is None else _Silence(self._loop, ping_s)
        try:
            while True:
                end = len(entries)
                if position < end:
                    entry = entries[position]
                    position += 1
                    if entry[1] == "delta" and position < end and entries[position][1] == "delta":
                        texts = [entry[2]["text"]]  # a reader behind gets the deltas it missed as one
                        while position < end and entries[position][1] == "delta":
                            entry = entries[position]
                            texts.append(entry[2]["text"])
                            position += 1
                        entry = (entry[0], "delta", {"text": "".join(texts)})
                    yield entry
                    continue
                if self.done:
                    return
                if self._step_now():  # the loop had not reached the turn's task: its first step ran here
                    continue
                waiter = self._loop.create_future()  # this reader's own: a reader leaving cancels only its wait
                self._waiters.append(waiter)
                if silence is not None:
                    silence.watch(waiter)
                if not await waiter:
                    yield None  # nothing for ping_s seconds: the reader sends a keep-alive
        finally:
            if silence is not None:
                silence.stop()


class _Silence:
    """Wakes a reader's wait with False once it has lasted ``ping_s`` seconds (time for a keep-alive). One timer per
    reader, moved on only when it fires, instead of a timer made and cancelled for every event."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ping_s: float) -> None:
        self._loop, self._ping_s = loop, ping_s
        self._waiter: Optional[asyncio.Future] = None
        self._since = 0.0
        self._timer: Optional[asyncio.TimerHandle] = None

    def watch(self, waiter: asyncio.Future) -> None:
        """``waiter`` is the reader's wait, from now."""
        self._waiter, self._since = waiter, self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_at(self._since + self._ping_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():  # not waiting now: the next wait starts the timer again
            return
        due = self._since + self._ping_s
        if self._loop.time() >= due - self._ping_s / 1000:  # (a timer may fire within the clock's resolution early)
            waiter.set_result(False)
        else:  # the wait began after the timer was set
            self._timer = self._loop.call_at(due, self._fire)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiter = None


class Reader:
    """One reader of a :class:`TurnLog`: :meth:`events` from an id; :meth:`close` detaches (idempotent)."""

    def __init__(self, log: TurnLog) -> None:
        self.log = log
        self._closed = False

    def events(self, after: int = 0, ping_s: Optional[float] = None) -> AsyncIterator[Optional[Entry]]:
        """The events after id ``after`` (0: all), then the new ones as they come, until the turn's last; with
        ``ping_s``, None after each ``ping_s`` seconds without one (time for a keep-alive)."""
        return self.log._follow(after, ping_s)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self.log._detached()


class TurnLogs:
    """The logs of this process's turns by assistant message id: while the turn runs and ``keep_s`` seconds after
    (at most ``max_kept`` ended ones, the oldest dropped first)."""

    def __init__(self, keep_s: float = 60.0, max_kept: int = 1024) -> None:
        self.keep_s, self.max_kept = keep_s, max_kept
        self._logs: Dict[str, TurnLog] = {}
        self._ended: "OrderedDict[str, float]" = OrderedDict()

    def add(self, message_id: str, log: TurnLog) -> TurnLog:
        self._logs[message_id] = log
        log._task.add_done_callback(lambda _: self._ended_now(message_id))
        return log

    def get(self, message_id: str) -> Optional[TurnLog]:
        self._expire()
        return self._logs.get(message_id)

    def _ended_now(self, message_id: str) -> None:
        self._ended[message_id] = asyncio.get_running_loop().time() + self.keep_s
        self._expire()

    def _expire(self) -> None:
        if not self._ended:
            return
        now = asyncio.get_running_loop().time()
        while self._ended:
            message_id, until = next(iter(self._ended.items()))
            if until > now and len(self._ended) <= self.max_kept:
                break
            self._ended.popitem(last=False)
            self._logs.pop(message_id, None)

    async def cancel_all(self) -> None:
        """Cancel every running turn (the server stops: each answer is stored ``cancelled``)."""
        for log in list(self._logs.values()):
            await log.cancel()
