"""Placeholder lifecycle for streamed turns, shared by the sync and async streams.

A turn stores the user message and an assistant placeholder (status ``pending``) before the first token. The
stream wrappers finalise the placeholder exactly once: ``complete`` when the deltas run out, ``error`` (with the
partial text and the error) when the source raises, ``cancelled`` (with the partial text) when the consumer stops
reading (closes the generator, breaks out of the loop, or calls ``close()`` / ``aclose()`` on the response).
Generation stops with the reader: nothing is produced (or paid for) after that. The partial text of a cancelled
answer is what the user saw, so the next turn's history holds it (``ConversationStore.history``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from dataclasses import dataclass, field
from functools import partial
from typing import Any, AsyncGenerator, AsyncIterator, Callable, Dict, Generator, Iterator, List, Optional

from llama_index.core.chat_engine.types import StreamingAgentChatResponse
from llama_index_convrag.errors import ConfigurationError

logger = logging.getLogger(__name__)
FinalizeFn = Callable[[str, str, Optional[BaseException]], None]
DoneCallback = Callable[[str, str], None]


class Finalizer:
    """Calls ``fn(status, text, error)`` once, then the done callbacks; later calls are ignored. Thread-safe."""

    def __init__(self, fn: FinalizeFn) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._callbacks: List[DoneCallback] = []
        self.status: Optional[str] = None
        self.text = ""

    @property
    def done(self) -> bool:
        return self.status is not None

    def add_done_callback(self, callback: DoneCallback) -> None:
        """``callback(status, text)`` once the turn is persisted (at once if it already is)."""
        with self._lock:
            if self.status is None:
                self._callbacks.append(callback)
                return
        callback(self.status, self.text)

    def __call__(self, status: str, text: str, error: Optional[BaseException] = None) -> None:
        with self._lock:
            if self.status is not None:
                return
            self.status, self.text = status, text
        try:
            self._fn(status, text, error)
        finally:
            for callback in self._callbacks:
                callback(status, text)


def stream_lifecycle(deltas: Iterator[str], finalize: Finalizer) -> Generator[str, None, None]:
    """Yield non-empty deltas; finalise complete / error / cancelled."""
    parts = []
    try:
        for delta in deltas:
            if delta:
                parts.append(delta)
                yield delta
    except GeneratorExit:
        close = getattr(deltas, "close", None)
        if close is not None:
            close()
        finalize("cancelled", "".join(parts))
        raise
    except BaseException as e:
        finalize("error", "".join(parts), e)
        raise
    finalize("complete", "".join(parts))


async def astream_lifecycle(deltas: AsyncIterator[str], finalize: Finalizer) -> AsyncGenerator[str, None]:
    """Async twin of :func:`stream_lifecycle`."""
    parts = []
    try:
        async for delta in deltas:
            if delta:
                parts.append(delta)
                yield delta
    except GeneratorExit:
        aclose = getattr(deltas, "aclose", None)
        if aclose is not None:
            await aclose()
        finalize("cancelled", "".join(parts))
        raise
    except BaseException as e:  # includes asyncio.CancelledError: the consumer stopped
        status = "cancelled" if type(e).__name__ == "CancelledError" else "error"
        finalize(status, "".join(parts), None if status == "cancelled" else e)
        raise
    finalize("complete", "".join(parts))


@dataclass
class ConvRAGStreamingResponse(StreamingAgentChatResponse):
    """A streamed turn. ``message_id`` (the assistant placeholder) is set before the first token.

    Read ``response_gen`` (sync) or ``async_response_gen()`` (async) once; stop early with ``close()`` /
    ``aclose()`` (or just stop iterating) and the placeholder is finalised as ``cancelled``. ``is_done`` turns True
    once the turn is persisted, whatever its status; ``response`` is then the text (stripped, as core's).
    ``awrite_response_to_history_task`` (set once ``async_response_gen()`` starts) completes at that moment too.
    """

    message_id: str = ""
    user_message_id: str = ""
    conversation_id: str = ""
    metadata: Dict[str, Any] = field(default_factory=dict)
    finalizer: Optional[Finalizer] = None
    sync_stream: Optional[Generator[str, None, None]] = None
    async_stream: Optional[AsyncGenerator[str, None]] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.is_writing_to_memory = False
        if self.finalizer is not None:  # a weak reference: a dropped response is finalised at once (no cycle)
            self.finalizer.add_done_callback(partial(_mark_persisted, weakref.ref(self)))

    @property
    def status(self) -> str:
        """``pending`` until finalised, then ``complete`` / ``error`` / ``cancelled``."""
        return "pending" if self.finalizer is None or self.finalizer.status is None else self.finalizer.status

    @property
    def response_gen(self) -> Generator[str, None, None]:  # type: ignore[override]
        if self.sync_stream is None:
            raise ConfigurationError("this response was produced by astream_chat(); iterate async_response_gen()")
        return self._wrap_sync(self.sync_stream)

    def _wrap_sync(self, stream: Generator[str, None, None]) -> Generator[str, None, None]:
        try:
            for delta in stream:
                self.unformatted_response += delta
                yield delta
        finally:
            self.close()

    async def async_response_gen(self) -> AsyncGenerator[str, None]:  # type: ignore[override]
        if self.async_stream is None:
            raise ConfigurationError("this response was produced by stream_chat(); iterate response_gen")
        if self.finalizer is not None and self.awrite_response_to_history_task is None:
            self.awrite_response_to_history_task = asyncio.ensure_future(_persisted(self.finalizer))
        try:
            async for delta in self.async_stream:
                self.unformatted_response += delta
                yield delta
        finally:
            await self.aclose()

    def close(self) -> None:
        """Stop the stream; an unfinished placeholder becomes ``cancelled``."""
        if self.sync_stream is not None:
            self.sync_stream.close()
        if self.finalizer is not None:
            self.finalizer("cancelled", self.unformatted_response)

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        if self.async_stream is not None:
            await self.async_stream.aclose()
        if self.finalizer is not None:
            self.finalizer("cancelled", self.unformatted_response)

    def __str__(self) -> str:
        return self.response

    def __del__(self) -> None:
        """A response dropped unread (or half read) finalises its placeholder as ``cancelled``."""
        finalizer = self.finalizer
        if finalizer is not None and not finalizer.done:
            try:
                finalizer("cancelled", self.unformatted_response)
            except Exception:  # noqa: BLE001 - never raise from a finaliser; the message stays 'streaming'
                logger.exception("could not finalise abandoned stream %s", self.message_id)


def _mark_persisted(ref: "weakref.ref[ConvRAGStreamingResponse]", status: str, text: str) -> None:
    response = ref()
    if response is not None:
        response.response = text.strip()
        response.is_done = True


async def _persisted(finalizer: Finalizer) -> str:
    """Wait (on the running loop) until ``finalizer`` has run; return the status."""
    loop = asyncio.get_running_loop()
    done: "asyncio.Future[str]" = loop.create_future()

    def resolve(status: str, text: str) -> None:
        def set_result() -> None:
            if not done.done():
                done.set_result(status)

        try:
            loop.call_soon_threadsafe(set_result)
        except RuntimeError:  # the loop is closed: nobody awaits any more
            pass

    finalizer.add_done_callback(resolve)
    return await done
