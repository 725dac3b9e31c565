"""Server-sent events of a turn: event ids, keep-alive comments while nothing is sent, and the end of a response
that leaves (or cancels) its turn however the response ends.

A turn route answers :class:`TurnStream`: the events a :class:`~.events.Reader` yields, each framed as ``id:``,
``event:``, ``data:`` (JSON), or as OpenAI's unnamed ``data:`` chunks by a ``render`` function. The connection gets a
``: ping`` comment after ``ping_s`` seconds of silence (proxies close idle connections), and the reader is closed
when the response ends, whether the stream finished, the client went away, or the response never started. The frames
are written in the request's own task (the disconnect is watched in another): the headers and the events the log holds
already (a turn's ``start``) go out without waiting for the event loop to reach a new task.

The frames are written here rather than by ``sse-starlette``: its response runs four tasks per stream and a cancel
scope per event, which doubled the CPU a stream costs the server (0.9 against 1.0 ms for a 22-event stream,
measured in isolation) and cost the load bench's targets.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Callable, Dict, Optional

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from llama_index_convrag.serve.events import Entry, Reader

MEDIA_TYPE = "text/event-stream"
HEADERS: Dict[str, str] = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: how long a browser's EventSource waits before it reconnects (with Last-Event-ID), in milliseconds
RETRY_MS = 1000
PING = b": ping\n\n"
#: entry -> the frame to send (None: send nothing for it)
Render = Callable[[Entry], Optional[bytes]]


def named(entry: Entry) -> bytes:
    """``id: N`` / ``event: name`` / ``data: {json}``: the conversation API's frames (JSON has no raw newline)."""
    ident, name, data = entry
    return f"id: {ident}\nevent: {name}\ndata: {json.dumps(data, default=str)}\n\n".encode("utf-8")


def unnamed(data: Any) -> bytes:
    """``data: {json}`` (OpenAI streams; ``data: [DONE]`` when ``data`` is that string)."""
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return f"data: {text}\n\n".encode("utf-8")


async def _frames(events: AsyncIterator[Optional[Entry]], render: Render, first: Optional[bytes],
                  tail: Optional[Callable[[], AsyncIterator[bytes]]]) -> AsyncIterator[bytes]:
    if first is not None:
        yield first
    async for entry in events:
        frame = PING if entry is None else render(entry)
        if frame is not None:
            yield frame
    if tail is not None:
        async for frame in tail():
            yield frame


class TurnStream(StreamingResponse):
    """The events of ``reader`` after id ``after``, rendered by ``render``; ``tail``: frames after the last event
    (OpenAI's ``[DONE]``). The response stops the moment the client disconnects, whatever ASGI spec version the
    server speaks, and closes the reader however it ends (also when its body was never read)."""

    media_type = MEDIA_TYPE

    def __init__(self, reader: Reader, *, after: int = 0, render: Render = named, ping_s: float = 15.0,
                 tail: Optional[Callable[[], AsyncIterator[bytes]]] = None) -> None:
        first = f"retry: {RETRY_MS}\n\n".encode() if render is named else None
        super().__init__(_frames(reader.events(after, ping_s), render, first, tail), headers=HEADERS)
        self._reader = reader

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    await self.listen_for_disconnect(receive)
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                try:  # in this task: the headers and the events the log holds now go out without waiting for the loop
                    await self.stream_response(send)
                except OSError:  # the socket went away before the disconnect message arrived
                    pass
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._reader.close()
