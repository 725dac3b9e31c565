"""No text: return the source nodes with an empty answer; no LLM call (and no LLM needed)."""

from __future__ import annotations

from typing import List

from llama_index_convrag.synthesizers.base import BaseSynthesizer, RunState, Steps
from llama_index_convrag.synthesizers.types import ResponseMode


class NoText(BaseSynthesizer):
    """Retrieval only: ``response.response == ""`` and ``source_nodes`` set."""

    mode = ResponseMode.NO_TEXT.value
    requires_llm = False

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        return ""
        yield  # pragma: no cover  (makes this a generator that asks for no call)
