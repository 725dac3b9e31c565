"""Server-sent events: one ``event:`` / ``data:`` frame per event, JSON data; text deltas coalesced per window."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any, AsyncGenerator, AsyncIterator, Deque, Dict, Optional, Tuple

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

SSE_HEADERS: Dict[str, str] = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
MEDIA_TYPE = "text/event-stream"
Event = Tuple[str, Dict[str, Any]]


def frame(event: str, data: Any) -> bytes:
    """One named event."""
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode("utf-8")


def data_frame(data: Any) -> bytes:
    """An unnamed event (OpenAI streams: ``data: {...}``; ``data: [DONE]`` when ``data`` is that string)."""
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return f"data: {text}\n\n".encode("utf-8")


class Coalesced:
    """``events`` with consecutive ``delta`` events merged: a delta goes out at once when the last one went out at
    least ``window_s`` ago, else with whatever text arrived until then (one frame, not one per token). Any other event
    (or the end) goes out at once, after the text before it. ``window_s <= 0``: every event as it comes.

    ``events`` starts in its own task as soon as this is made (a turn's retrieval begins while its response is being
    set up, not after) and runs there (a held delta waits for the window, not for the next token). :meth:`aclose`
    cancels that task and waits for its cleanup, whether or not anything was read; so does the reader stopping early.
    """

    def __init__(self, events: AsyncIterator[Event], window_s: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._window_s = window_s
        self._buffer: Deque[Event] = deque()
        self._end: Dict[str, Optional[BaseException]] = {}
        # one waiter at a time (a future, not an Event plus wait_for: no task and no Event per held delta): ``any``
        # when the buffer is empty, else only an event that ends a held delta (or the end) wakes the reader early
        self._future: Optional[asyncio.Future] = None
        self._any = False
        self._urgent = False
        self._task = self._loop.create_task(self._pump(events))
        self._reader = self._read()

    def __aiter__(self) -> "Coalesced":
        return self

    async def __anext__(self) -> Event:
        return await self._reader.__anext__()

    async def aclose(self) -> None:
        """Stop: cancel the source's task and wait for its cleanup (also when nothing was read)."""
        try:
            await self._reader.aclose()
        finally:
            await self._stop()

    def _notify(self, urgent: bool) -> None:
        self._urgent = self._urgent or urgent
        future = self._future
        if future is not None and not future.done() and (urgent or self._any):
            future.set_result(None)

    async def _sleep_until_woken(self, timeout: Optional[float], any_item: bool) -> None:
        future = self._future = self._loop.create_future()
        self._any = any_item
        timer = None if timeout is None else self._loop.call_later(
            timeout, lambda: future.done() or future.set_result(None))
        try:
            await future
        finally:
            self._future = None
            if timer is not None:
                timer.cancel()

    async def _pump(self, events: AsyncIterator[Event]) -> None:
        try:
            async for item in events:
                self._buffer.append(item)
                self._notify(item[0] != "delta")
        except BaseException as e:  # noqa: BLE001 - handed to the reader (CancelledError included)
            self._end["error"] = e
        else:
            self._end["error"] = None
        self._notify(True)

    async def _stop(self) -> None:
        if not self._task.done():
            self._task.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.gather(self._task, return_exceptions=True)

    async def _read(self) -> AsyncGenerator[Event, None]:
        buffer, window_s = self._buffer, self._window_s
        last_delta = float("-inf")
        try:
            while True:
                if not buffer and not self._end:
                    await self._sleep_until_woken(None, any_item=True)
                if window_s > 0 and buffer and buffer[0][0] == "delta":
                    hold = last_delta + window_s - self._loop.time()
                    if hold > 0 and not self._urgent and not self._end:
                        await self._sleep_until_woken(hold, any_item=False)
                    last_delta = self._loop.time()
                self._urgent = False
                while buffer:
                    name, data = buffer.popleft()
                    if name != "delta" or window_s <= 0:
                        yield name, data
                        continue
                    text = [data["text"]]
                    while buffer and buffer[0][0] == "delta":
                        text.append(buffer.popleft()[1]["text"])
                    yield "delta", {"text": "".join(text)}
                if self._end and not buffer:
                    error = self._end["error"]
                    if error is not None and not isinstance(error, asyncio.CancelledError):
                        raise error
                    return
        finally:
            await self._stop()


def coalesced(events: AsyncIterator[Event], window_s: float) -> Coalesced:
    """:class:`Coalesced` (``events`` start at once, in their own task)."""
    return Coalesced(events, window_s)


class EventStreamResponse(StreamingResponse):
    """A stream that stops (cancels its body iterator) the moment the client disconnects, whatever ASGI spec version
    the server speaks: a turn's generation must end with its reader. ``events``: the :class:`Coalesced` the body
    reads, closed when the response ends however it ends (also when its body was never read)."""

    media_type = MEDIA_TYPE

    def __init__(self, content: AsyncIterator[bytes], events: Coalesced, headers: Optional[Dict[str, str]] = None
                 ) -> None:
        super().__init__(content, headers=headers)
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    try:
                        await self.stream_response(send)
                    except OSError:  # the socket went away before the disconnect message arrived
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._events.aclose()
