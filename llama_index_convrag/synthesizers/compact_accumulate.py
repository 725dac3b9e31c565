"""Compact accumulate: pack the chunks into windows as core does (``compact.py``: the prompt helper's splitter and
overlap, the prompt measured with the extra variables filled), then accumulate one answer per window."""

from __future__ import annotations

from typing import List

from llama_index_convrag.synthesizers.accumulate import Accumulate
from llama_index_convrag.synthesizers.base import Shape
from llama_index_convrag.synthesizers.compact import Compacts
from llama_index_convrag.synthesizers.types import ResponseMode


class CompactAndAccumulate(Compacts, Accumulate):
    """Accumulate over packed windows instead of single chunks."""

    mode = ResponseMode.COMPACT_ACCUMULATE.value

    def _compact_shapes(self) -> List[Shape]:
        return self._shapes()
