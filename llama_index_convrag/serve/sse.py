"""Server-sent events over ``sse-starlette``: keep-alive comments while nothing is sent, event ids, and the end of
a response that leaves (or cancels) its turn however the response ends.

A turn route answers :class:`TurnStream`: the events a :class:`~.events.Reader` yields, each framed as ``id:``,
``event:``, ``data:`` (JSON), or as OpenAI's unnamed ``data:`` chunks by a ``render`` function. The connection gets a
``: ping`` comment every ``ping_s`` seconds of silence (proxies close idle connections), and the reader is closed
when the response ends, whether the stream finished, the client went away, or the response never started.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Callable, Dict, Optional

import anyio
from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

from llama_index_convrag.serve.events import Entry, Reader

MEDIA_TYPE = "text/event-stream"
#: how long a browser's EventSource waits before it reconnects (with Last-Event-ID), in milliseconds
RETRY_MS = 1000
#: entry -> the SSE event to send (None: send nothing for it)
Render = Callable[[Entry], Optional[ServerSentEvent]]


def named(entry: Entry) -> ServerSentEvent:
    """``id: N`` / ``event: name`` / ``data: {json}``: the conversation API's frames."""
    ident, name, data = entry
    return ServerSentEvent(json.dumps(data, default=str), event=name, id=str(ident), sep="\n")


def unnamed(data: Any) -> ServerSentEvent:
    """``data: {json}`` (OpenAI streams; ``data: [DONE]`` when ``data`` is that string)."""
    return ServerSentEvent(data if isinstance(data, str) else json.dumps(data, default=str), sep="\n")


async def _frames(events: AsyncIterator[Entry], render: Render, first: Optional[ServerSentEvent]
                  ) -> AsyncIterator[ServerSentEvent]:
    if first is not None:
        yield first
    async for entry in events:
        event = render(entry)
        if event is not None:
            yield event


class TurnStream(EventSourceResponse):
    """The events of ``reader`` after id ``after``, rendered by ``render``; ``tail``: frames after the last event
    (OpenAI's ``[DONE]``). The reader is closed when the response ends."""

    def __init__(self, reader: Reader, *, after: int = 0, render: Render = named, ping_s: float = 15.0,
                 tail: Optional[Callable[[], AsyncIterator[ServerSentEvent]]] = None,
                 headers: Optional[Dict[str, str]] = None) -> None:
        first = ServerSentEvent(retry=RETRY_MS, sep="\n") if render is named else None
        body = _frames(reader.events(after), render, first)
        if tail is not None:
            body = _chain(body, tail)
        super().__init__(body, ping=ping_s, sep="\n", headers={"Cache-Control": "no-cache", **(headers or {})})
        self._reader = reader

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except OSError:  # the socket went away before the disconnect message arrived
            pass
        finally:
            with anyio.CancelScope(shield=True):
                await self._reader.close()


async def _chain(body: AsyncIterator[ServerSentEvent], tail: Callable[[], AsyncIterator[ServerSentEvent]]
                 ) -> AsyncIterator[ServerSentEvent]:
    async for frame in body:
        yield frame
    async for frame in tail():
        yield frame
