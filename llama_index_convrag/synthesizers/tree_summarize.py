"""Tree summarize: pack chunks, summarise each window, repack the summaries, recurse until one window remains.

The summaries of one level are independent, so they run in parallel with ``use_async`` (and always in
``aget_response``). Extra variables are counted in every level's budget.
"""

from __future__ import annotations

from typing import List

from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TREE_SUMMARIZE_PROMPT_SEL

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

    template_defaults = {"summary_template": (DEFAULT_TREE_SUMMARIZE_PROMPT_SEL, CITATION_TREE_SUMMARIZE_PROMPT)}

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        budget = self._budget(run, [(self._summary_template, {"context_str": ""}, DEFAULT_PADDING)])
        windows = self._pack(chunks, budget)
        if not windows:
            return self._empty_response
        while len(windows) > 1:
            summaries = yield [CallRequest(self._summary_template, run.fill(context_str=w)) for w in windows]
            repacked = self._pack([str(s) for s in summaries], budget)
            if len(repacked) >= len(windows):
                raise ValueError(
                    f"tree_summarize cannot converge: {len(windows)} windows gave summaries that fill "
                    f"{len(repacked)} windows of {budget} tokens; lower the LLM's num_output or raise context_window"
                )
            windows = repacked
        final = yield CallRequest(
            self._summary_template,
            run.fill(context_str=windows[0]),
            stream=self._streaming and self._output_cls is None,
        )
        return final
