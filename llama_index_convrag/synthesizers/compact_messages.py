"""The compact modes' message path (``multimodal=True``): pack the message chunks as core packs them (its
``ChatPromptHelper`` against the biggest template, query and extras filled), then hand them to the parent mode's
``get_response_from_messages``, counting into the same ledger."""

from __future__ import annotations

from typing import Any, List, Sequence

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.types import RESPONSE_TEXT_TYPE

from llama_index_convrag.synthesizers.base import _ACTIVE_RUN, BaseSynthesizer, Shape


class PacksMessages(BaseSynthesizer):
    """Mixin for a compact mode: put it before the mode it compacts (``class C(PacksMessages, Refine)``)."""

    def _message_shapes(self) -> List[Shape]:
        """The call shapes the packed messages must fit."""
        raise NotImplementedError

    def get_response_from_messages(
        self, query_str: str, message_chunks: Sequence[ChatMessage], **extra_vars: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Pack the messages, then answer over them as the parent mode does."""
        self._check_messages("get_response_from_messages")
        run, token = self._within(query_str, extra_vars)
        try:
            packed = self._fit(run, self._message_shapes(), message_chunks)
            return super().get_response_from_messages(query_str=query_str, message_chunks=packed, **extra_vars)
        finally:
            _ACTIVE_RUN.reset(token)

    async def aget_response_from_messages(
        self, query_str: str, message_chunks: Sequence[ChatMessage], **extra_vars: Any
    ) -> RESPONSE_TEXT_TYPE:
        """Async twin of :meth:`get_response_from_messages`."""
        self._check_messages("aget_response_from_messages")
        run, token = self._within(query_str, extra_vars)
        try:
            packed = self._fit(run, self._message_shapes(), message_chunks)
            return await super().aget_response_from_messages(
                query_str=query_str, message_chunks=packed, **extra_vars
            )
        finally:
            _ACTIVE_RUN.reset(token)
