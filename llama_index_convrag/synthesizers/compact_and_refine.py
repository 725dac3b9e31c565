"""Compact: pack chunks to fill the usable window (extra variables counted), then refine across the windows.

Core packs with the template's variables empty and re-splits with 10% overlap, so it can need more calls than
``ceil(total tokens / usable window)`` and overflows with long extras; here text windows are filled exactly, without
overlap, so the call count sits at that bound. Message chunks (``multimodal=True``) are packed as core packs them,
with ``response_padding_size`` as the padding (``compact_messages.py``).
"""

from __future__ import annotations

from typing import Any, List

from llama_index_convrag.synthesizers.base import RunState, Shape
from llama_index_convrag.synthesizers.compact_messages import PacksMessages
from llama_index_convrag.synthesizers.refine import Refine
from llama_index_convrag.synthesizers.types import ResponseMode


class CompactAndRefine(PacksMessages, Refine):
    """Refine over packed windows instead of single chunks."""

    mode = ResponseMode.COMPACT.value

    def _windows(self, run: RunState, chunks: List[Any]) -> List[Any]:
        """Pack with room kept for the existing answer, so refine steps rarely re-split (messages arrive packed)."""
        if self._multimodal:
            return list(chunks)
        return self._fit(run, self._compact_shapes(), chunks)

    def _message_shapes(self) -> List[Shape]:
        padding = self._response_padding_size
        return [
            (self._qa, self._ctx(""), padding),
            (self._refine, {**self._ctx(""), "existing_answer": ""}, padding),
        ]
