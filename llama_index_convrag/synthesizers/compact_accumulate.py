"""Compact accumulate: pack chunks to fill the window (extras counted), then accumulate one answer per window.
Message chunks (``multimodal=True``) are packed as core packs them (``compact_messages.py``)."""

from __future__ import annotations

from typing import Any, List

from llama_index_convrag.synthesizers.accumulate import Accumulate
from llama_index_convrag.synthesizers.base import RunState, Shape
from llama_index_convrag.synthesizers.compact_messages import PacksMessages
from llama_index_convrag.synthesizers.types import ResponseMode


class CompactAndAccumulate(PacksMessages, Accumulate):
    """Accumulate over packed windows instead of single chunks."""

    mode = ResponseMode.COMPACT_ACCUMULATE.value

    def _windows(self, run: RunState, chunks: List[Any]) -> List[Any]:
        if self._multimodal:
            return list(chunks)  # packed by get_response_from_messages
        return self._fit(run, self._shapes(), chunks)

    def _message_shapes(self) -> List[Shape]:
        return self._shapes()
