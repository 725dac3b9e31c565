"""Tree summarize: pack chunks, summarise each window, repack the summaries, recurse until one window remains.

The summaries of one level are independent, so they run in parallel with ``use_async`` (and always in
``aget_response``). Extra variables are counted in every level's budget.
"""

from __future__ import annotations

from typing import Any, List, Optional, Type

from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper

from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.chat_prompts import CHAT_CONTENT_TREE_SUMMARIZE_PROMPT
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TREE_SUMMARIZE_PROMPT_SEL

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.prompts.synthesis import CITATION_TREE_SUMMARIZE_PROMPT
from llama_index_convrag.synthesizers.base import (
    DEFAULT_PADDING,
    BaseSynthesizer,
    CallRequest,
    RunState,
    Steps,
)
from llama_index_convrag.synthesizers.types import ResponseMode


class TreeSummarize(BaseSynthesizer):
    """Bottom-up summaries: ``n`` windows cost ``n`` calls at the first level, then fewer per level, plus one."""

    mode = ResponseMode.TREE_SUMMARIZE.value

    template_defaults = {
        "summary_template": (DEFAULT_TREE_SUMMARIZE_PROMPT_SEL, CITATION_TREE_SUMMARIZE_PROMPT),
        "chat_summary_template": (CHAT_CONTENT_TREE_SUMMARIZE_PROMPT, CHAT_CONTENT_TREE_SUMMARIZE_PROMPT),
    }
    _summary_template: BasePromptTemplate
    _chat_summary_template: BasePromptTemplate

    def __init__(
        self,
        llm: Any = None,
        callback_manager: Optional[CallbackManager] = None,
        prompt_helper: Optional[PromptHelper] = None,
        chat_prompt_helper: Optional[ChatPromptHelper] = None,
        summary_template: Optional[BasePromptTemplate] = None,
        chat_summary_template: Optional[BasePromptTemplate] = None,
        output_cls: Optional[Type[BaseModel]] = None,
        streaming: bool = False,
        use_async: bool = False,
        verbose: bool = False,
        multimodal: bool = False,
        **common: Any,
    ) -> None:
        """Core's positional order (``TreeSummarize(llm, callback_manager, prompt_helper, ...)``); the rest of
        :class:`BaseSynthesizer`'s options by keyword."""
        super().__init__(
            llm, callback_manager=callback_manager, prompt_helper=prompt_helper,
            chat_prompt_helper=chat_prompt_helper, summary_template=summary_template,
            chat_summary_template=chat_summary_template, output_cls=output_cls, streaming=streaming,
            use_async=use_async, verbose=verbose, multimodal=multimodal, **common)

    def _steps(self, run: RunState, chunks: List[Any]) -> Steps:
        template = self._pick(self._summary_template, self._chat_summary_template)
        shapes = [(template, self._ctx(""), DEFAULT_PADDING)]
        windows = self._fit(run, shapes, chunks)
        if not windows:
            return self._empty_response
        while len(windows) > 1:
            summaries = yield [CallRequest(template, run.fill(**self._ctx(w))) for w in windows]
            repacked = self._fit(run, shapes, [self._as_chunk(self._summary_text(s)) for s in summaries])
            if len(repacked) >= len(windows):
                raise ConfigurationError(
                    f"tree_summarize cannot converge: {len(windows)} windows gave summaries that fill "
                    f"{len(repacked)} windows; lower the LLM's num_output or raise context_window"
                )
            windows = repacked
        final = yield CallRequest(
            template, run.fill(**self._ctx(windows[0])), stream=self._streaming and self._output_cls is None
        )
        return final

    @staticmethod
    def _summary_text(summary: Any) -> str:
        return summary.model_dump_json() if hasattr(summary, "model_dump_json") else str(summary)
