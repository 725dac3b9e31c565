"""Stream helpers: a finished text as a one-delta stream, and the answer label a model echoes from the prompt
("New Answer: ...") taken off a reply or a stream."""

from __future__ import annotations

import re
from typing import AsyncGenerator, AsyncIterator, Generator, Iterator, Optional, Protocol

#: The labels core's and our QA / refine prompts end with; small models begin their reply by repeating them
#: (Qwen2.5-0.5B: "New Answer: ..." after core's chat refine prompt).
ANSWER_LABEL = re.compile(r"\A\s*(?:new answer|refined answer|answer)\s*:[ \t]*", re.IGNORECASE)
_LABEL_MAX = len("  refined answer :  ")


def strip_answer_label(text: str) -> str:
    """``text`` without a leading echoed answer label (only at the very start; the rest is untouched)."""
    match = ANSWER_LABEL.match(text)
    return text[match.end():] if match else text


class _LabelFilter:
    """Holds a stream's first deltas back only while they could still be an echoed label, then passes through."""

    _LABELS = ("new answer", "refined answer", "answer")

    def __init__(self) -> None:
        self._head: Optional[str] = ""
        self._after_label = False

    def _undecided(self, head: str) -> bool:
        probe = " ".join(head.lower().split())
        return len(head) < _LABEL_MAX and any(label.startswith(probe) or probe.startswith(label)
                                               for label in self._LABELS)

    def feed(self, delta: str) -> str:
        if self._head is None:
            if self._after_label:  # the first text after a stripped label loses its leading blanks
                delta = delta.lstrip(" \t")
                self._after_label = not delta
            return delta
        head = self._head + delta
        match = ANSWER_LABEL.match(head)
        if match is None and self._undecided(head):
            self._head = head
            return ""
        self._head = None
        rest = head[match.end():] if match else head
        self._after_label = match is not None and not rest
        return rest

    def flush(self) -> str:
        head, self._head = self._head, None
        return strip_answer_label(head) if head else ""


class DeltaFilter(Protocol):
    """Rewrites a stream: ``feed`` each delta (what may be shown now), ``flush`` at its end (the rest)."""

    def feed(self, delta: str) -> str: ...

    def flush(self) -> str: ...


def filtered_stream(gen: Iterator[str], through: DeltaFilter) -> Generator[str, None, None]:
    """``gen`` through ``through``; empty pieces are not yielded. When ``gen`` fails, the text held back is passed
    on before the error is raised (a stream cut mid-answer keeps its partial text)."""
    failure: Optional[Exception] = None
    try:
        for delta in gen:
            if out := through.feed(delta):
                yield out
    except Exception as error:
        failure = error
    if tail := through.flush():
        yield tail
    if failure is not None:
        raise failure


async def afiltered_stream(agen: AsyncIterator[str], through: DeltaFilter) -> AsyncGenerator[str, None]:
    """Async twin of :func:`filtered_stream`."""
    failure: Optional[Exception] = None
    try:
        async for delta in agen:
            if out := through.feed(delta):
                yield out
    except Exception as error:
        failure = error
    if tail := through.flush():
        yield tail
    if failure is not None:
        raise failure


def strip_label_stream(gen: Iterator[str]) -> Generator[str, None, None]:
    """A stream without a leading echoed answer label (see :data:`ANSWER_LABEL`)."""
    return filtered_stream(gen, _LabelFilter())


def astrip_label_stream(agen: AsyncIterator[str]) -> AsyncGenerator[str, None]:
    """:func:`strip_label_stream` for async streams."""
    return afiltered_stream(agen, _LabelFilter())


def gen_of(text: str) -> Generator[str, None, None]:
    yield text


async def agen_of(text: str) -> AsyncGenerator[str, None]:
    yield text
