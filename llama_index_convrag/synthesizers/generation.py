"""Generation: ignore the context and answer the query (plus any extra variables) with one LLM call, also when
retrieval found no nodes (that is its point; core answers too)."""

from __future__ import annotations

from typing import List

from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.default_prompts import DEFAULT_SIMPLE_INPUT_PROMPT

from llama_index_convrag.synthesizers.base import BaseSynthesizer, CallRequest, RunState, Steps
from llama_index_convrag.synthesizers.types import ResponseMode


class Generation(BaseSynthesizer):
    """One call with ``simple_template`` (default ``"{query_str}"``)."""

    mode = ResponseMode.GENERATION.value

    answers_without_nodes = True
    template_defaults = {"simple_template": (DEFAULT_SIMPLE_INPUT_PROMPT, DEFAULT_SIMPLE_INPUT_PROMPT)}
    _simple_template: BasePromptTemplate

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        stream = self._streaming and self._output_cls is None
        answer = yield CallRequest(self._simple_template, run.fill(), stream=stream)
        return answer
