"""``coalesced``: text deltas merged per window, other events at once, the source's cleanup before an early stop
returns. Deterministic: the sources never wait on the clock."""

from __future__ import annotations

import asyncio
from typing import AsyncGenerator, List

import pytest

from llama_index_convrag.serve.sse import Event, coalesced, data_frame, frame

TURN: List[Event] = [("start", {"id": "a"}), ("delta", {"text": "Hel"}), ("delta", {"text": "lo"}),
                     ("delta", {"text": " you"}), ("done", {"status": "complete"})]


async def source(items: List[Event], log: List[str], pause: bool = False) -> AsyncGenerator[Event, None]:
    try:
        for item in items:
            if pause:
                await asyncio.sleep(0)
            yield item
        log.append("finished")
    finally:
        log.append("cleaned")


async def collect(window_s: float) -> List[Event]:
    return [e async for e in coalesced(source(TURN, []), window_s)]


async def test_window_zero_passes_every_event() -> None:
    assert await collect(0) == TURN


async def test_deltas_held_in_a_window_go_out_as_one_before_the_next_event() -> None:
    # a window far longer than the test: the done event (not the clock) releases the held text
    out = await asyncio.wait_for(collect(3600.0), 60)
    assert out == [("start", {"id": "a"}), ("delta", {"text": "Hello you"}), ("done", {"status": "complete"})]


async def test_early_stop_cancels_the_source_and_waits_for_its_cleanup() -> None:
    log: List[str] = []
    stream = coalesced(source(TURN * 50, log, pause=True), 3600.0)
    assert await stream.__anext__() == ("start", {"id": "a"})
    await stream.aclose()
    assert log == ["cleaned"]


async def test_a_source_error_reaches_the_reader_after_what_came_before() -> None:
    async def failing() -> AsyncGenerator[Event, None]:
        yield "start", {"id": "a"}
        raise RuntimeError("boom")

    stream = coalesced(failing(), 3600.0)
    assert await stream.__anext__() == ("start", {"id": "a"})
    with pytest.raises(RuntimeError, match="boom"):
        await stream.__anext__()


def test_frames() -> None:
    assert frame("delta", {"text": "é"}) == 'event: delta\ndata: {"text": "\\u00e9"}\n\n'.encode()
    assert data_frame("[DONE]") == b"data: [DONE]\n\n"


async def test_the_source_starts_before_anything_is_read() -> None:
    # a turn's retrieval begins while its response is being set up
    log: List[str] = []

    async def started() -> AsyncGenerator[Event, None]:
        log.append("began")
        yield "start", {"id": "a"}

    stream = coalesced(started(), 3600.0)
    await asyncio.sleep(0)
    assert log == ["began"]
    assert [e async for e in stream] == [("start", {"id": "a"})]


async def test_closing_before_any_read_cancels_the_source_and_waits_for_its_cleanup() -> None:
    # a client gone before its response began: the turn is cancelled, its cleanup done
    log: List[str] = []
    stream = coalesced(source(TURN * 50, log, pause=True), 3600.0)
    await asyncio.sleep(0)
    await stream.aclose()
    assert log == ["cleaned"]
