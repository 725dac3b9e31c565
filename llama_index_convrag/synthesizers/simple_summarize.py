"""Simple summarize: every chunk in one prompt (truncated to the window, extras counted) and one LLM call."""

from __future__ import annotations

import logging
from typing import Any, List

from llama_index_convrag.synthesizers.base import DEFAULT_PADDING, CallRequest, RunState, Steps
from llama_index_convrag.synthesizers.qa_templates import QATemplates
from llama_index_convrag.synthesizers.types import ResponseMode

logger = logging.getLogger(__name__)


class SimpleSummarize(QATemplates):
    """One call; context beyond the window is cut (with a logged warning)."""

    mode = ResponseMode.SIMPLE_SUMMARIZE.value

    def _steps(self, run: RunState, chunks: List[Any]) -> Steps:
        windows = self._fit(run, [(self._qa, self._ctx(""), DEFAULT_PADDING)], chunks)
        if not windows:
            return self._empty_response
        if len(windows) > 1:
            logger.warning("simple_summarize: context needs %d windows; keeping the first", len(windows))
        stream = self._streaming and self._output_cls is None
        answer = yield CallRequest(self._qa, run.fill(**self._ctx(windows[0])), stream=stream)
        if isinstance(answer, str) and not answer.strip():
            return self._empty_response
        return answer
