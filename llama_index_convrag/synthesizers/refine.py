"""Refine: answer from the first chunk, then refine the answer with each next chunk (one LLM call per chunk).

Fixes over core: extra variables are counted when a chunk is fitted to the window; structured answer filtering skips
(and reports) unparsable replies; ``early_stop`` stops once the answer is final (llama_index issue 21397).

Early-stop signal: with structured filtering, the first reply with ``query_satisfied=True``. Without structured
outputs, a refine step that returns the existing answer unchanged (whitespace-normalised): the default refine prompt
tells the model to do exactly that when the new context adds nothing, so later chunks are unlikely to matter. The
calls not made are reported as ``response.metadata["llm_calls_saved"]``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, List, Optional

from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.chat_prompts import CHAT_CONTENT_QA_PROMPT, CHAT_CONTENT_REFINE_PROMPT
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_REFINE_PROMPT_SEL, DEFAULT_TEXT_QA_PROMPT_SEL

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.prompts.synthesis import ALIGNED_QA_PROMPT_SEL, CITATION_QA_PROMPT, CITATION_REFINE_PROMPT
from llama_index_convrag.synthesizers.base import (
    DEFAULT_PADDING,
    BaseSynthesizer,
    CallRequest,
    RunState,
    Steps,
    SynthesizerConfig,
)
from llama_index_convrag.synthesizers.types import ResponseMode

DEFAULT_RESPONSE_PADDING_SIZE = 500  # core's room for the existing answer in refine prompts


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


class Refine(BaseSynthesizer):
    """One LLM call per chunk (a chunk too big for the window is split first)."""

    mode = ResponseMode.REFINE.value
    supports_structured_filtering = True
    supports_early_stop = True

    template_defaults = {
        "text_qa_template": (DEFAULT_TEXT_QA_PROMPT_SEL, CITATION_QA_PROMPT),
        "refine_template": (DEFAULT_REFINE_PROMPT_SEL, CITATION_REFINE_PROMPT),
        "chat_content_qa_template": (CHAT_CONTENT_QA_PROMPT, CHAT_CONTENT_QA_PROMPT),
        "chat_content_refine_template": (CHAT_CONTENT_REFINE_PROMPT, CHAT_CONTENT_REFINE_PROMPT),
    }
    aligned_defaults = {"text_qa_template": ALIGNED_QA_PROMPT_SEL}
    _text_qa_template: BasePromptTemplate
    _refine_template: BasePromptTemplate
    _chat_content_qa_template: BasePromptTemplate
    _chat_content_refine_template: BasePromptTemplate

    def __init__(
        self,
        llm: Any = None,
        *,
        early_stop: bool = False,
        response_padding_size: int = DEFAULT_RESPONSE_PADDING_SIZE,
        **common: Any,
    ) -> None:
        super().__init__(llm, **common)
        if response_padding_size < 0:
            raise ConfigurationError(f"response_padding_size must be >= 0, got {response_padding_size}")
        self._early_stop = early_stop
        self._response_padding_size = response_padding_size

    @property
    def _qa(self) -> BasePromptTemplate:
        return self._pick(self._text_qa_template, self._chat_content_qa_template)

    @property
    def _refine(self) -> BasePromptTemplate:
        return self._pick(self._refine_template, self._chat_content_refine_template)

    @classmethod
    def config_kwargs(cls, config: SynthesizerConfig) -> Dict[str, Any]:
        return {**super().config_kwargs(config), "early_stop": config.early_stop}

    def _windows(self, run: RunState, chunks: List[Any]) -> List[Any]:
        """Refine: one window per chunk, split now only if it overflows the QA prompt.

        Core pre-splits every chunk with 500 tokens reserved for an answer that may be ten tokens long; here each
        refine step refits its chunk against the actual existing answer instead (``_refit``).
        """
        return self._fit(run, [(self._qa, self._ctx("", "context_str"), DEFAULT_PADDING)], chunks, per_chunk=True)

    def _refit(self, run: RunState, answer: str, chunk: Any) -> List[Any]:
        """Split a text ``chunk`` again if it no longer fits next to the actual existing answer."""
        if self._multimodal:
            return [chunk]  # packed by the chat prompt helper with room for the answer already
        shape = (self._refine_template, {"context_msg": "", "existing_answer": answer}, DEFAULT_PADDING)
        budget = self._budget(run, [shape])
        if self.count_tokens(chunk) <= budget:
            return [chunk]
        return self._pack([chunk], budget)

    def _steps(self, run: RunState, chunks: List[str]) -> Steps:
        windows: Deque[str] = deque(self._windows(run, chunks))
        answer: Optional[Any] = None
        while windows:
            chunk = windows.popleft()
            if answer is None:
                template, context = self._qa, self._ctx(chunk, "context_str")
            else:
                pieces = self._refit(run, answer, chunk)
                if len(pieces) > 1:
                    windows.extendleft(reversed(pieces))
                    continue
                template, context = self._refine, {"existing_answer": answer, **self._ctx(chunk, "context_msg")}
            # streaming (as core): every call streams; the last is handed on, earlier ones and structured replies are
            # collected (intermediate answers feed the next refine prompt)
            stream = self._streaming and self._output_cls is None
            consume = bool(windows) and not self._structured
            reply = yield CallRequest(
                template, run.fill(**context), structured=self._structured, stream=stream, consume=consume
            )
            if self._structured:
                if reply is None or not reply.query_satisfied:
                    continue  # skipped (reported by the driver) or not relevant
                answer = reply.answer
                if self._early_stop:
                    run.llm_calls_saved = len(windows)
                    break
                continue
            if self._early_stop and answer is not None and isinstance(reply, str) and _same(reply, answer):
                run.llm_calls_saved = len(windows)
                break
            answer = reply
        if answer is None or (isinstance(answer, str) and not answer.strip()):
            return self._empty_response
        return answer
