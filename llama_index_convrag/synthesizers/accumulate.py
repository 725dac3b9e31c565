"""Accumulate: answer the query once per chunk and join the answers ``Response i: ...`` (core's format).

The per-chunk calls are independent: parallel with ``use_async`` (and always in ``aget_response``). With structured
answer filtering (core has none for this mode) only answers with ``query_satisfied=True`` are kept; unparsable
replies are skipped and reported. Streaming yields the joined text once every answer is in.
"""

from __future__ import annotations

from typing import Any, List

from llama_index_convrag.synthesizers.base import DEFAULT_PADDING, CallRequest, RunState, Shape, Steps
from llama_index_convrag.synthesizers.qa_templates import QATemplates
from llama_index_convrag.synthesizers.types import ResponseMode

DEFAULT_SEPARATOR = "\n---------------------\n"


class Accumulate(QATemplates):
    """One call per chunk (split if it overflows); answers joined with ``separator`` (a constructor argument, or
    per call: ``get_response(..., separator=" | ")`` / ``synthesize(..., separator=...)``, as core)."""

    mode = ResponseMode.ACCUMULATE.value
    supports_structured_filtering = True
    response_options = frozenset({"separator"})

    def __init__(
        self,
        llm: Any = None,
        *,
        separator: str = DEFAULT_SEPARATOR,
        **common: Any,
    ) -> None:
        super().__init__(llm, **common)
        self._separator = separator

    def _shapes(self) -> List[Shape]:
        return [(self._qa, self._ctx(""), DEFAULT_PADDING)]

    def _windows(self, run: RunState, chunks: List[Any]) -> List[Any]:
        return self._fit(run, self._shapes(), chunks, per_chunk=True)

    @staticmethod
    def flatten_list(md_array: List[List[Any]]) -> List[Any]:
        """Core's helper: a list of lists, flattened."""
        return [item for sublist in md_array for item in sublist]

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        windows = self._windows(run, chunks)
        if not windows:
            return self._empty_response
        requests = [
            CallRequest(self._qa, run.fill(**self._ctx(w)), structured=self._structured) for w in windows
        ]
        replies = yield requests
        if self._structured:
            answers = [r.answer for r in replies if r is not None and r.query_satisfied]
        else:
            answers = [r if r else self._empty_response for r in replies]
        if not answers:
            return self._empty_response
        separator = run.options.get("separator", self._separator)
        return separator.join(f"Response {i}: {a}" for i, a in enumerate(answers, start=1))
