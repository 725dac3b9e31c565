"""Generation: ignore the context and answer the query (plus any extra variables) with one LLM call."""

from __future__ import annotations

from typing import Any, List, Optional

from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.default_prompts import DEFAULT_SIMPLE_INPUT_PROMPT
from llama_index.core.prompts.mixin import PromptDictType

from llama_index_convrag.synthesizers.base import BaseSynthesizer, CallRequest, RunState, Steps, SynthesizerConfig
from llama_index_convrag.synthesizers.types import ResponseMode


class Generation(BaseSynthesizer):
    """One call with ``simple_template`` (default ``"{query_str}"``)."""

    mode = ResponseMode.GENERATION.value

    def __init__(self, llm: Any = None, *, simple_template: Optional[BasePromptTemplate] = None, **common: Any) -> None:
        super().__init__(llm, **common)
        self._simple_template = simple_template if simple_template is not None else DEFAULT_SIMPLE_INPUT_PROMPT

    @classmethod
    def from_config(cls, config: SynthesizerConfig) -> "Generation":
        return cls(config.llm, simple_template=config.simple_template, **config.common())

    def _get_prompts(self) -> PromptDictType:
        return {"simple_template": self._simple_template}

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        stream = self._streaming and self._output_cls is None
        answer = yield CallRequest(self._simple_template, run.fill(), stream=stream)
        return answer
