"""Accumulate: answer the query once per chunk and join the answers ``Response i: ...`` (core's format).

The per-chunk calls are independent: parallel with ``use_async`` (and always in ``aget_response``). With structured
answer filtering (core has none for this mode) only answers with ``query_satisfied=True`` are kept; unparsable
replies are skipped and reported. Streaming yields the joined text once every answer is in.
"""

from __future__ import annotations

from typing import Any, List

from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TEXT_QA_PROMPT_SEL

from llama_index_convrag.prompts.synthesis import CITATION_QA_PROMPT
from llama_index_convrag.synthesizers.base import (
    DEFAULT_PADDING,
    BaseSynthesizer,
    CallRequest,
    RunState,
    Steps,
)
from llama_index_convrag.synthesizers.types import ResponseMode

DEFAULT_SEPARATOR = "\n---------------------\n"


class Accumulate(BaseSynthesizer):
    """One call per chunk (split if it overflows); answers joined with ``separator``."""

    mode = ResponseMode.ACCUMULATE.value
    supports_structured_filtering = True

    template_defaults = {"text_qa_template": (DEFAULT_TEXT_QA_PROMPT_SEL, CITATION_QA_PROMPT)}

    def __init__(
        self,
        llm: Any = None,
        *,
        separator: str = DEFAULT_SEPARATOR,
        **common: Any,
    ) -> None:
        super().__init__(llm, **common)
        self._separator = separator

    def _budget_for(self, run: RunState) -> int:
        return self._budget(run, [(self._text_qa_template, {"context_str": ""}, DEFAULT_PADDING)])

    def _windows(self, run: RunState, chunks: List[str]) -> List[str]:
        budget = self._budget_for(run)
        return [window for chunk in chunks for window in self._pack([chunk], budget)]

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        windows = self._windows(run, chunks)
        if not windows:
            return self._empty_response
        requests = [
            CallRequest(self._text_qa_template, run.fill(context_str=w), structured=self._structured) for w in windows
        ]
        replies = yield requests
        if self._structured:
            answers = [r.answer for r in replies if r is not None and r.query_satisfied]
        else:
            answers = [r if r else self._empty_response for r in replies]
        if not answers:
            return self._empty_response
        return self._separator.join(f"Response {i}: {a}" for i, a in enumerate(answers, start=1))
