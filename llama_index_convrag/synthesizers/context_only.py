"""Context only: return the chunks joined by blank lines (numbered with citations); no LLM call."""

from __future__ import annotations

from typing import List

from llama_index_convrag.synthesizers.base import BaseSynthesizer, RunState, Steps
from llama_index_convrag.synthesizers.types import ResponseMode


class ContextOnly(BaseSynthesizer):
    """The context a prompt would carry, as the answer."""

    mode = ResponseMode.CONTEXT_ONLY.value
    requires_llm = False

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        return "\n\n".join(chunks)
        yield  # pragma: no cover  (makes this a generator that asks for no call)
