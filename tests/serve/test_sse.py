"""``TurnStream``: frames with ids, the ``start`` frame sent from the request's own task before the turn's task runs,
the reader closed when the response ends. An ASGI call with plain ``receive`` / ``send`` callables (the served
stream over real HTTP: tests/serve/test_api.py)."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncGenerator, Dict, List

from llama_index_convrag.serve.events import Event, TurnLog
from llama_index_convrag.serve.sse import TurnStream

SCOPE: Dict[str, Any] = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "method": "POST",
                         "path": "/", "headers": []}


async def test_the_start_frame_goes_out_before_the_turns_task_runs() -> None:
    steps: List[str] = []

    async def turn() -> AsyncGenerator[Event, None]:
        yield "start", {"id": "a"}
        steps.append("engine")  # the turn's own task, once the loop reaches it
        yield "done", {"status": "complete"}

    log = await TurnLog.begin(turn(), window_s=0)
    never = asyncio.Event()
    sent: List[tuple] = []

    async def receive() -> Dict[str, Any]:
        await never.wait()  # the client stays: the stream ends with the turn
        return {"type": "http.disconnect"}

    async def send(message: Dict[str, Any]) -> None:
        sent.append((message["type"], message.get("body", b""), list(steps)))

    await TurnStream(log.reader(), ping_s=15.0)(SCOPE, receive, send)  # in this task, as a route's response
    bodies = [(body, seen) for kind, body, seen in sent if kind == "http.response.body" and body]
    assert sent[0][0] == "http.response.start"
    assert bodies[0] == (b"retry: 1000\n\n", [])
    assert bodies[1] == (b'id: 1\nevent: start\ndata: {"id": "a"}\n\n', [])  # before the turn's task ran
    assert bodies[2] == (b'id: 2\nevent: done\ndata: {"status": "complete"}\n\n', ["engine"])
    assert log.done and sent[-1][:2] == ("http.response.body", b"")
