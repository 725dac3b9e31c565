"""Simple summarize: every chunk in one prompt (truncated to the window, extras counted) and one LLM call."""

from __future__ import annotations

import logging
from typing import List

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

logger = logging.getLogger(__name__)


class SimpleSummarize(BaseSynthesizer):
    """One call; context beyond the window is cut (with a logged warning)."""

    mode = ResponseMode.SIMPLE_SUMMARIZE.value

    template_defaults = {"text_qa_template": (DEFAULT_TEXT_QA_PROMPT_SEL, CITATION_QA_PROMPT)}

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        budget = self._budget(run, [(self._text_qa_template, {"context_str": ""}, DEFAULT_PADDING)])
        windows = self._pack(chunks, budget)
        if not windows:
            return self._empty_response
        if len(windows) > 1:
            logger.warning(
                "simple_summarize: context needs %d windows of %d tokens; keeping the first", len(windows), budget
            )
        stream = self._streaming and self._output_cls is None
        answer = yield CallRequest(self._text_qa_template, run.fill(context_str=windows[0]), stream=stream)
        if isinstance(answer, str) and not answer.strip():
            return self._empty_response
        return answer
