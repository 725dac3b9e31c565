"""The compact modes' packing, for text and message chunks: as core's ``CompactAndRefine`` /
``CompactAndAccumulate``, ``get_response`` repacks the chunks with the prompt helper (word-boundary windows, the
helper's ``chunk_overlap_ratio``, ``separator`` and ``chunk_size_limit``, the mode's padding) and hands the windows
to the parent mode's ``get_response``; messages (``multimodal=True``) go the same way through
``get_response_from_messages`` and the chat prompt helper.

One difference: the prompt is measured with the query *and the extra variables* filled (core measures the extra
variables empty, so a long ``{chat_history}`` overflows the window). Citations number the chunks before packing,
so ``[n]`` is the n-th source, not the n-th window.
"""

from __future__ import annotations

from typing import Any, List, Sequence

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.types import RESPONSE_TEXT_TYPE

from llama_index_convrag.synthesizers import citations as cite
from llama_index_convrag.synthesizers.base import BaseSynthesizer, RunState, Shape


class Compacts(BaseSynthesizer):
    """Mixin for a compact mode: put it before the mode it compacts (``class C(Compacts, Refine)``)."""

    def _compact_shapes(self) -> List[Shape]:
        """The call shapes ``(template, empty context, padding)`` the packed windows must fit."""
        raise NotImplementedError

    def _windows(self, run: RunState, chunks: List[Any]) -> List[Any]:
        return list(chunks)  # packed by get_response / get_response_from_messages

    def _prepare_chunks(self, chunks: Sequence[Any]) -> List[Any]:
        return list(chunks)  # numbered before packing (_packed)

    def _packed(self, run: RunState, chunks: Sequence[Any]) -> List[Any]:
        numbered = cite.number_chunks(chunks) if self._citations else cite.source_texts(chunks)
        return self._repack(run, self._compact_shapes(), numbered)

    def get_response(self, query_str: str, text_chunks: Sequence[str], **extra_vars: Any) -> RESPONSE_TEXT_TYPE:
        """Pack the chunks into windows, then answer over them as the parent mode does."""
        with self._within(query_str, extra_vars) as run:
            packed = self._packed(run, text_chunks)
            return super().get_response(query_str=query_str, text_chunks=packed, **extra_vars)

    async def aget_response(
        self, query_str: str, text_chunks: Sequence[str], **extra_vars: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Async twin of :meth:`get_response`."""
        with self._within(query_str, extra_vars) as run:
            packed = self._packed(run, text_chunks)
            return await super().aget_response(query_str=query_str, text_chunks=packed, **extra_vars)

    def get_response_from_messages(
        self, query_str: str, message_chunks: Sequence[ChatMessage], **extra_vars: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Pack the messages, then answer over them as the parent mode does."""
        self._check_messages("get_response_from_messages")
        with self._within(query_str, extra_vars) as run:
            packed = self._packed(run, message_chunks)
            return super().get_response_from_messages(query_str=query_str, message_chunks=packed, **extra_vars)

    async def aget_response_from_messages(
        self, query_str: str, message_chunks: Sequence[ChatMessage], **extra_vars: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Async twin of :meth:`get_response_from_messages`."""
        self._check_messages("aget_response_from_messages")
        with self._within(query_str, extra_vars) as run:
            packed = self._packed(run, message_chunks)
            return await super().aget_response_from_messages(
                query_str=query_str, message_chunks=packed, **extra_vars
            )
