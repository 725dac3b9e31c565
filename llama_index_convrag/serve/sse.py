"""Server-sent events: one ``event:`` / ``data:`` frame per event, JSON data."""

from __future__ import annotations

import json
from typing import Any, Dict

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

SSE_HEADERS: Dict[str, str] = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
MEDIA_TYPE = "text/event-stream"


def frame(event: str, data: Any) -> bytes:
    """One named event."""
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode("utf-8")


def data_frame(data: Any) -> bytes:
    """An unnamed event (OpenAI streams: ``data: {...}``; ``data: [DONE]`` when ``data`` is that string)."""
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return f"data: {text}\n\n".encode("utf-8")


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
