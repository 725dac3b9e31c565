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


async def coalesced(events: AsyncIterator[Event], window_s: float) -> AsyncGenerator[Event, None]:
    """``events`` with consecutive ``delta`` events merged: a delta goes out at once when the last one went out at
    least ``window_s`` ago, else with whatever text arrived until then (one frame, not one per token). Any other event
    (or the end) goes out at once, after the text before it. ``window_s <= 0``: every event as it comes.

    ``events`` runs in its own task (so a held delta waits for the window, not for the next token); when this
    generator stops early that task is cancelled and awaited (its cleanup runs before this one returns).
    """
    if window_s <= 0:
        async for item in events:
            yield item
        return
    loop = asyncio.get_running_loop()
    buffer: Deque[Any] = deque()
    end: Dict[str, Optional[BaseException]] = {}
    # one waiter at a time (a future, not an Event plus wait_for: no task and no Event per held delta): ``any`` when
    # the buffer is empty, else only an event that ends a held delta (or the end) wakes the reader early
    wake: Dict[str, Any] = {"future": None, "any": False, "urgent": False}

    def notify(urgent: bool) -> None:
        wake["urgent"] = wake["urgent"] or urgent
        future = wake["future"]
        if future is not None and not future.done() and (urgent or wake["any"]):
            future.set_result(None)

    async def sleep_until_woken(timeout: Optional[float], any_item: bool) -> None:
        future = wake["future"] = loop.create_future()
        wake["any"] = any_item
        timer = None if timeout is None else loop.call_later(timeout, lambda: future.done() or future.set_result(None))
        try:
            await future
        finally:
            wake["future"] = None
            if timer is not None:
                timer.cancel()

    async def pump() -> None:
        try:
            async for item in events:
                buffer.append(item)
                notify(item[0] != "delta")
        except BaseException as e:  # noqa: BLE001 - handed to the reader (CancelledError included)
            end["error"] = e
        else:
            end["error"] = None
        notify(True)

    task = loop.create_task(pump())
    last_delta = float("-inf")
    try:
        while True:
            if not buffer and not end:
                await sleep_until_woken(None, any_item=True)
            if buffer and buffer[0][0] == "delta":
                hold = last_delta + window_s - loop.time()
                if hold > 0 and not wake["urgent"] and not end:
                    await sleep_until_woken(hold, any_item=False)
                last_delta = loop.time()
            wake["urgent"] = False
            while buffer:
                name, data = buffer.popleft()
                if name != "delta":
                    yield name, data
                    continue
                text = [data["text"]]
                while buffer and buffer[0][0] == "delta":
                    text.append(buffer.popleft()[1]["text"])
                yield "delta", {"text": "".join(text)}
            if end and not buffer:
                error = end["error"]
                if error is not None and not isinstance(error, asyncio.CancelledError):
                    raise error
                return
    finally:
        if not task.done():
            task.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.gather(task, return_exceptions=True)


class EventStreamResponse(StreamingResponse):
    """A stream that stops (cancels its body iterator) the moment the client disconnects, whatever ASGI spec version
    the server speaks: a turn's generation must end with its reader."""

    media_type = MEDIA_TYPE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
