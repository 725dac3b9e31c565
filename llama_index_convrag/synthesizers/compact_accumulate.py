"""Compact accumulate: pack chunks to fill the window (extras counted), then accumulate one answer per window."""

from __future__ import annotations

from typing import Any, List

from llama_index_convrag.synthesizers.accumulate import Accumulate
from llama_index_convrag.synthesizers.base import RunState
from llama_index_convrag.synthesizers.types import ResponseMode


class CompactAndAccumulate(Accumulate):
    """Accumulate over packed windows instead of single chunks."""

    mode = ResponseMode.COMPACT_ACCUMULATE.value

    def _windows(self, run: RunState, chunks: List[Any]) -> List[Any]:
        return self._fit(run, self._shapes(), chunks)
