"""instrumentation: spans and events only when a real handler listens, and then exactly LlamaIndex's."""

from __future__ import annotations

import asyncio
from typing import Any, List

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

from llama_index_convrag.instrumentation import emit, observed, span_when_observed
from tests.fakes import EventCollector

dispatcher = get_dispatcher("tests.instrumentation_probe")


class Probe:
    def __init__(self) -> None:
        self.calls: List[Any] = []

    @span_when_observed(dispatcher)
    def run(self, x: int, *, y: int = 1) -> int:
        self.calls.append((x, y))
        return x + y

    @span_when_observed(dispatcher)
    async def arun(self, x: int) -> int:
        self.calls.append(x)
        return 2 * x


class Ping(BaseEvent):
    @classmethod
    def class_name(cls) -> str:
        return "Ping"


def test_no_span_and_no_event_without_a_handler() -> None:
    other = get_dispatcher("tests.elsewhere")  # not on the probe's chain: does not count
    spans = SimpleSpanHandler()
    other.add_span_handler(spans)
    built: List[int] = []
    try:
        assert not observed(dispatcher)
        probe = Probe()
        assert (probe.run(1, y=2), asyncio.run(probe.arun(3))) == (3, 6)
        emit(dispatcher, lambda: built.append(1) or Ping())
    finally:
        other.span_handlers.remove(spans)
    assert probe.calls == [(1, 2), 3] and built == [] and spans.open_spans == {}


def test_spans_and_events_as_llama_index_makes_them_when_observed() -> None:
    root = get_dispatcher()
    spans, events = SimpleSpanHandler(), EventCollector(events=[])
    root.add_span_handler(spans)
    root.add_event_handler(events)
    try:
        assert observed(dispatcher)
        probe = Probe()
        assert (probe.run(1), asyncio.run(probe.arun(2))) == (2, 4)
        emit(dispatcher, Ping)
    finally:
        root.span_handlers.remove(spans)
        root.event_handlers.remove(events)
    ids = [s.id_ for s in spans.completed_spans]
    assert any(i.startswith("Probe.run-") for i in ids) and any(i.startswith("Probe.arun-") for i in ids)
    assert [e.class_name() for e in events.events] == ["Ping"]
    assert not observed(dispatcher)
