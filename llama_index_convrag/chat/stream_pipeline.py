"""A streamed turn's one pipeline: from the answer's deltas to the committed answer, in one generator.

:class:`TurnStream` iterates the answer's raw deltas (the LLM's text, before any hold) through the turn's one
:class:`~llama_index_convrag.synthesizers.stream_hold.StreamHold` (the synthesizer's own, with the chat engine's
:class:`~.fallback.AnswerRule` added: see :func:`stream_parts`), yields what it lets through, and at the end shows
the held start, or the recovered answer when the hold's verdict refuses it (:mod:`~.fallback`). It commits the turn
exactly once, through the engine's port (:mod:`~.port`): ``complete`` when the deltas run out, ``error`` (with the
text shown and the error) when they fail, ``cancelled`` (with the text shown) when the reader stops it: closes the
generator, cancels the task reading it, or calls :meth:`TurnStream.close` / :meth:`TurnStream.aclose` (the
response's ``close()`` / ``aclose()``). Generation stops with the reader. Nothing is committed from a finaliser: a
stream dropped unread and unclosed stays ``pending`` until recovery.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Iterator, List, Optional, Tuple

from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse

from llama_index_convrag.synthesizers.stream_hold import AsyncHeldStreamingResponse, HeldStreamingResponse, StreamHold

Commit = Callable[[str, str, Optional[BaseException]], None]
ACommit = Callable[[str, str, Optional[BaseException]], Awaitable[None]]
DoneCallback = Callable[[str, str], None]


def stream_parts(response: Any, is_async: bool) -> Tuple[Any, StreamHold]:
    """``(raw deltas, hold)`` of an answer: our synthesizers' streams hand over their hold and the deltas before it
    (one hold, driven once); any other response's text goes through a new, empty hold (sync deltas for a sync
    turn; async ones, a sync stream iterated as it is, for an async turn)."""
    if isinstance(response, (HeldStreamingResponse, AsyncHeldStreamingResponse)) and response.raw is not None:
        raw: Any = response.raw
    elif is_async and isinstance(response, AsyncStreamingResponse) and response.response_gen is not None:
        raw = response.response_gen
    elif isinstance(response, StreamingResponse) and response.response_gen is not None:
        raw = response.response_gen
    else:
        raw = iter([str(response)])
    hold = response.hold if isinstance(response, (HeldStreamingResponse, AsyncHeldStreamingResponse)) else StreamHold()
    if is_async and not isinstance(raw, AsyncIterator):
        raw = _aiter_sync(raw)
    return raw, hold


async def _aiter_sync(deltas: Iterator[str]) -> AsyncIterator[str]:
    for delta in deltas:
        yield delta


class TurnStream:
    """The pipeline of one streamed turn (see the module docstring). ``deltas`` (sync) or ``adeltas`` (async) are the
    raw deltas; ``recover(held text)`` / ``arecover`` give the answer shown instead of a refused start;
    ``commit(status, text, error)`` / ``acommit`` write the turn (called once)."""

    def __init__(self, hold: StreamHold, *, commit: Commit, acommit: Optional[ACommit] = None,
                 deltas: Optional[Iterator[str]] = None, adeltas: Optional[AsyncIterator[str]] = None,
                 recover: Optional[Callable[[str], str]] = None,
                 arecover: Optional[Callable[[str], Awaitable[str]]] = None) -> None:
        self.hold = hold
        self.text = ""
        self.status: Optional[str] = None  # set once committed
        self._deltas, self._adeltas = deltas, adeltas
        self._recover, self._arecover = recover, arecover
        self._commit, self._acommit = commit, acommit
        self._claimed = False
        self._lock = threading.Lock()
        self._callbacks: List[DoneCallback] = []
        # weak: a sync generator a ``for`` loop drops (``break``) is closed at once, which commits ``cancelled``
        self._gen: Optional["weakref.ref[Generator[str, None, None]]"] = None
        self._agen: Optional["weakref.ref[AsyncGenerator[str, None]]"] = None

    # --- commit once ---------------------------------------------------------------------------------------------
    def add_done_callback(self, callback: DoneCallback) -> None:
        """``callback(status, text)`` once the turn is committed (at once if it is)."""
        with self._lock:
            if self.status is None:
                self._callbacks.append(callback)
                return
        callback(self.status, self.text)

    def _claim(self) -> bool:
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def _done(self, status: str) -> None:
        with self._lock:
            self.status = status
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(status, self.text)

    def commit(self, status: str, error: Optional[BaseException] = None) -> None:
        """Commit the turn as ``status`` with the text shown, unless it was committed already."""
        if self._claim():
            try:
                self._commit(status, self.text, error)
            finally:
                self._done(status)

    async def acommit(self, status: str, error: Optional[BaseException] = None) -> None:
        """Async twin of :meth:`commit`."""
        if self._claim():
            try:
                if self._acommit is not None:
                    await self._acommit(status, self.text, error)
                else:
                    self._commit(status, self.text, error)
            finally:
                self._done(status)

    # --- the generators ------------------------------------------------------------------------------------------
    def iterate(self) -> Generator[str, None, None]:
        """The sync stream (one: a second call returns the same generator while it is alive)."""
        gen = self._gen() if self._gen is not None else None
        if gen is None:
            gen = self._iterate()
            self._gen = weakref.ref(gen)
        return gen

    def aiterate(self) -> AsyncGenerator[str, None]:
        """The async stream (one, as :meth:`iterate`)."""
        agen = self._agen() if self._agen is not None else None
        if agen is None:
            agen = self._aiterate()
            self._agen = weakref.ref(agen)
        return agen

    def _show(self, out: str) -> str:
        self.text += out
        return out

    def _iterate(self) -> Generator[str, None, None]:
        hold, deltas = self.hold, self._deltas
        assert deltas is not None
        status, error = "complete", None
        try:
            for delta in deltas:
                if out := hold.feed(delta):
                    yield self._show(out)
            out = hold.end()
            if hold.verdict is not None and self._recover is not None:
                out = self._recover(hold.held_text)
            if out:
                yield self._show(out)
        except GeneratorExit:
            status = "cancelled"
            close = getattr(deltas, "close", None)
            if close is not None:
                close()
            raise
        except BaseException as e:
            status, error = "error", e
            if tail := hold.abort():  # a stream cut mid-answer keeps its partial text
                yield self._show(tail)
            raise
        finally:
            self.commit(status, error)

    async def _aiterate(self) -> AsyncGenerator[str, None]:
        hold, deltas = self.hold, self._adeltas
        assert deltas is not None
        status, error = "complete", None
        try:
            async for delta in deltas:
                if out := hold.feed(delta):
                    yield self._show(out)
            out = hold.end()
            if hold.verdict is not None and self._arecover is not None:
                out = await self._arecover(hold.held_text)
            if out:
                yield self._show(out)
        except GeneratorExit:
            status = "cancelled"
            aclose = getattr(deltas, "aclose", None)
            if aclose is not None:
                await aclose()
            raise
        except asyncio.CancelledError:  # the reader's task was cancelled: it stopped reading
            status = "cancelled"
            raise
        except BaseException as e:
            status, error = "error", e
            if tail := hold.abort():
                yield self._show(tail)
            raise
        finally:
            await self.acommit(status, error)

    # --- stopping ------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the stream; an uncommitted turn is committed ``cancelled`` with the text shown."""
        gen = self._gen() if self._gen is not None else None
        if gen is not None:
            gen.close()
        else:
            close = getattr(self._deltas, "close", None)
            if close is not None:
                close()
        self.commit("cancelled")

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        agen = self._agen() if self._agen is not None else None
        if agen is not None:
            await agen.aclose()
        else:
            aclose = getattr(self._adeltas, "aclose", None)
            if aclose is not None:
                await aclose()
        await self.acommit("cancelled")


__all__ = ["TurnStream", "stream_parts"]
