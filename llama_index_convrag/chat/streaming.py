"""``ConvRAGStreamingResponse``: a streamed turn as core's ``StreamingAgentChatResponse``.

A turn stores the user message and an assistant placeholder (status ``pending``) before the first token; the
response carries their ids at once. Its text comes from the turn's one pipeline
(:class:`~.stream_pipeline.TurnStream`), which commits the turn once: ``complete`` when the answer ends, ``error``
(with the partial text and the error) when it fails, ``cancelled`` (with the partial text) when the reader stops
(closes the generator, breaks out of the loop and closes the response, or cancels its task). The partial text of a
cancelled answer is what the user saw, so the next turn's history holds it (``ConversationStore.history``). A
response dropped without being read or closed finalises nothing: its placeholder stays ``pending`` until recovery
(:mod:`~llama_index_convrag.storage.conversation.recovery`), never from a finaliser.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from functools import partial
from typing import Any, AsyncGenerator, Dict, Generator, Optional

from llama_index.core.chat_engine.types import StreamingAgentChatResponse

from llama_index_convrag.chat.stream_pipeline import TurnStream
from llama_index_convrag.errors import ConfigurationError


@dataclass
class ConvRAGStreamingResponse(StreamingAgentChatResponse):
    """A streamed turn. ``message_id`` (the assistant placeholder) is set before the first token.

    Read ``response_gen`` (sync) or ``async_response_gen()`` (async) once; stop early with ``close()`` /
    ``aclose()`` and the placeholder is finalised as ``cancelled`` (closing the generator, as a ``for`` loop's
    ``break`` does for a sync one, does the same). ``is_done`` turns True once the turn is committed, whatever its
    status; ``response`` is then the text (stripped, as core's). ``awrite_response_to_history_task`` (set once
    ``async_response_gen()`` is called) completes at that moment too, with the status.
    """

    message_id: str = ""
    user_message_id: str = ""
    conversation_id: str = ""
    metadata: Dict[str, Any] = field(default_factory=dict)
    stream: Optional[TurnStream] = None
    is_async: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        self.is_writing_to_memory = False
        if self.stream is not None:  # a weak reference: the stream keeps no response alive
            self.stream.add_done_callback(partial(_mark_committed, weakref.ref(self)))

    @property
    def status(self) -> str:
        """``pending`` until committed, then ``complete`` / ``error`` / ``cancelled``."""
        return "pending" if self.stream is None or self.stream.status is None else self.stream.status

    @property
    def response_gen(self) -> Generator[str, None, None]:  # type: ignore[override]
        if self.stream is None or self.is_async:
            raise ConfigurationError("this response was produced by astream_chat(); iterate async_response_gen()")
        return self.stream.iterate()

    def async_response_gen(self) -> AsyncGenerator[str, None]:  # type: ignore[override]
        if self.stream is None or not self.is_async:
            raise ConfigurationError("this response was produced by stream_chat(); iterate response_gen")
        if self.awrite_response_to_history_task is None:
            self.awrite_response_to_history_task = asyncio.ensure_future(_committed(self.stream))
        return self.stream.aiterate()

    def close(self) -> None:
        """Stop the stream; an unfinished placeholder becomes ``cancelled``."""
        if self.stream is not None:
            self.stream.close()

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        if self.stream is not None:
            await self.stream.aclose()

    def __str__(self) -> str:
        return self.response


def _mark_committed(ref: "weakref.ref[ConvRAGStreamingResponse]", status: str, text: str) -> None:
    response = ref()
    if response is not None:
        response.unformatted_response = text
        response.response = text.strip()
        response.is_done = True


async def _committed(stream: TurnStream) -> str:
    """Wait (on the running loop) until ``stream`` is committed; return the status."""
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

    stream.add_done_callback(resolve)
    return await done


__all__ = ["ConvRAGStreamingResponse"]
