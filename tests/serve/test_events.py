"""``TurnLog``: deltas merged per window, other events at once, ids from 1, readers joining from any id, the turn
cancelled when its last reader leaves (at once, or after the grace), cleanup awaited. Deterministic: the sources
never wait on the clock except where a test says so."""

from __future__ import annotations

import asyncio
from typing import AsyncGenerator, List

from llama_index_convrag.serve.events import Event, TurnLog, TurnLogs

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


async def read(turn: TurnLog, after: int = 0) -> List[tuple]:
    reader = turn.reader()
    try:
        return [e async for e in reader.events(after)]
    finally:
        await reader.close()


async def test_window_zero_numbers_every_event_from_one() -> None:
    turn = TurnLog(source(TURN, []), window_s=0)
    out = await read(turn)  # a reader that came after the whole turn: the deltas as one
    assert turn.entries() == [(i, n, d) for i, (n, d) in enumerate(TURN, start=1)]
    assert out == [(1, "start", {"id": "a"}), (4, "delta", {"text": "Hello you"}), (5, "done", {"status": "complete"})]


async def test_deltas_held_in_a_window_go_out_as_one_before_the_next_event() -> None:
    # a window far longer than the test: the done event (not the clock) releases the held text
    turn = TurnLog(source(TURN, []), window_s=3600.0)
    await asyncio.wait_for(turn.wait(), 60)
    assert turn.entries() == [(1, "start", {"id": "a"}), (2, "delta", {"text": "Hel"}), (3, "delta", {"text": "lo you"}),
                   (4, "done", {"status": "complete"})]
    assert turn.text == "Hello you"


async def test_a_reader_joining_later_gets_what_it_missed_and_the_deltas_as_one() -> None:
    turn = TurnLog(source(TURN, []), window_s=0)
    await turn.wait()
    assert await read(turn, after=1) == [(4, "delta", {"text": "Hello you"}), (5, "done", {"status": "complete"})]
    assert await read(turn, after=3) == [(4, "delta", {"text": " you"}), (5, "done", {"status": "complete"})]
    assert await read(turn, after=99) == []


async def test_the_last_reader_leaving_cancels_the_turn_and_waits_for_its_cleanup() -> None:
    log: List[str] = []
    turn = TurnLog(source(TURN * 50, log, pause=True), window_s=0)
    reader = turn.reader()
    events = reader.events()
    assert await events.__anext__() == (1, "start", {"id": "a"})
    await reader.close()
    assert log == ["cleaned"] and turn.done


async def test_with_a_grace_the_turn_waits_for_a_reader_to_come_back() -> None:
    log: List[str] = []

    async def slow() -> AsyncGenerator[Event, None]:
        try:
            yield "start", {"id": "a"}
            for i in range(5):
                await asyncio.sleep(0.05)
                yield "delta", {"text": str(i)}
            yield "done", {"status": "complete"}
        finally:
            log.append("cleaned")

    turn = TurnLog(slow(), window_s=0, grace_s=30.0)
    first = turn.reader()
    assert await first.events().__anext__() == (1, "start", {"id": "a"})
    await first.close()  # the client went away; within the grace another reader comes
    assert await read(turn, after=1) == [(2, "delta", {"text": "0"}), (3, "delta", {"text": "1"}),
                                         (4, "delta", {"text": "2"}), (5, "delta", {"text": "3"}),
                                         (6, "delta", {"text": "4"}), (7, "done", {"status": "complete"})]
    assert log == ["cleaned"]


async def test_no_reader_after_the_grace_cancels() -> None:
    log: List[str] = []
    turn = TurnLog(source(TURN * 1000, log, pause=True), window_s=0, grace_s=0.01)
    await turn.reader().close()
    await asyncio.wait_for(turn.wait(), 10)
    assert log == ["cleaned"]


async def test_logs_are_found_by_message_id_while_running_and_kept_a_while() -> None:
    logs = TurnLogs(keep_s=3600)
    turn = logs.add("m1", TurnLog(source(TURN, []), window_s=0))
    assert logs.get("m1") is turn
    await turn.wait()
    await asyncio.sleep(0)
    assert logs.get("m1") is turn and logs.get("m2") is None
    gone = TurnLogs(keep_s=0)
    done = gone.add("m1", TurnLog(source(TURN, []), window_s=0))
    await done.wait()
    await asyncio.sleep(0)
    assert gone.get("m1") is None


async def test_a_silent_turn_gives_its_readers_keep_alives() -> None:
    gate = asyncio.Event()

    async def quiet() -> AsyncGenerator[Event, None]:
        yield "start", {"id": "a"}
        await gate.wait()  # retrieval takes a while
        yield "done", {"status": "complete"}

    turn = TurnLog(quiet(), window_s=0)
    reader = turn.reader()
    events = reader.events(ping_s=0.01)
    assert await events.__anext__() == (1, "start", {"id": "a"})
    assert await events.__anext__() is None  # a keep-alive: nothing came for ping_s
    gate.set()
    rest = [e async for e in events]
    assert rest[-1] == (2, "done", {"status": "complete"}) and set(rest[:-1]) <= {None}
    await reader.close()


async def test_keep_alives_repeat_while_silent_and_never_come_between_close_events() -> None:
    gate = asyncio.Event()

    async def busy_then_quiet() -> AsyncGenerator[Event, None]:
        yield "start", {"id": "a"}
        for i in range(40):  # an event every millisecond: far within ping_s
            await asyncio.sleep(0.001)
            yield "retrieval", {"n": i}
        await gate.wait()
        yield "done", {"status": "complete"}

    turn = TurnLog(busy_then_quiet(), window_s=0)
    reader = turn.reader()
    events = reader.events(ping_s=0.5)
    busy = [await events.__anext__() for _ in range(41)]
    assert None not in busy and busy[-1] == (41, "retrieval", {"n": 39})
    await events.aclose()  # type: ignore[attr-defined]
    events = reader.events(after=41, ping_s=0.01)
    assert [await events.__anext__() for _ in range(3)] == [None, None, None]  # one a ping_s of silence
    gate.set()
    assert [e async for e in events if e is not None] == [(42, "done", {"status": "complete"})]
    await reader.close()


async def test_begin_keeps_the_first_event_before_the_turns_task_runs() -> None:
    log: List[str] = []
    turn = await TurnLog.begin(source(TURN, log, pause=True), window_s=0)
    assert turn.entries() == [(1, "start", {"id": "a"})]  # no await since: the task has not run
    out = await read(turn)
    assert (out[0], out[-1]) == ((1, "start", {"id": "a"}), (5, "done", {"status": "complete"}))
    assert turn.entries() == [(i, n, d) for i, (n, d) in enumerate(TURN, start=1)]
    assert log == ["finished", "cleaned"]


async def test_a_reader_that_would_wait_takes_the_turns_first_step_itself() -> None:
    steps: List[object] = []
    gate = asyncio.Event()

    async def turn() -> AsyncGenerator[Event, None]:
        try:
            yield "start", {"id": "a"}
            steps.append(("engine began in", asyncio.current_task()))
            await gate.wait()
            steps.append("engine resumed")
            yield "done", {"status": "complete"}
        finally:
            steps.append("cleaned")

    loop = asyncio.get_running_loop()
    loop.call_soon(steps.append, "a pass of the loop")  # runs before the turn's task would, on its own
    log = await TurnLog.begin(turn(), window_s=0)
    loop.call_soon(gate.set)
    assert await read(log) == [(1, "start", {"id": "a"}), (2, "done", {"status": "complete"})]
    assert steps == [("engine began in", log._task), "a pass of the loop", "engine resumed", "cleaned"]


async def test_a_turn_cancelled_before_its_task_ran_still_runs_its_cleanup() -> None:
    log: List[str] = []
    turn = await TurnLog.begin(source(TURN, log), window_s=0)
    await turn.cancel()  # before the loop reached the task: the source is closed here
    assert log == ["cleaned"]
    assert turn.done
    assert await read(turn) == [(1, "start", {"id": "a"})]
