"""``BaseJudge``: grades one chunk against a question. Subclasses implement ``_grade`` / ``_agrade``.

The template methods guarantee a :class:`Verdict` whatever the hook returns: anything else becomes grade 0 with the
reason recorded. Errors of the call itself (the LLM is down, a timeout) are not grades and propagate.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType

from llama_index_convrag.judge.verdict import Verdict
from llama_index_convrag.prompts.judge import JUDGE_PROMPT


class BaseJudge(PromptMixin):
    """A chunk grader. ``judge_prompt`` is what an LLM judge sends; every judge formats it so that the search can
    count prompt tokens the same way for all judges."""

    def __init__(self, judge_prompt: BasePromptTemplate | None = None) -> None:
        self._judge_prompt = judge_prompt if judge_prompt is not None else JUDGE_PROMPT

    # prompts ---------------------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {"judge_prompt": self._judge_prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "judge_prompt" in prompts:
            self._judge_prompt = prompts["judge_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def prompt_text(self, question: str, chunk: str) -> str:
        return self._judge_prompt.format(question=question, chunk=chunk)

    # grading ---------------------------------------------------------------------------------------------
    def grade(self, question: str, chunk: str) -> Verdict:
        """The grade of ``chunk`` for ``question``; never raises for a malformed reply."""
        return _ensure(self._grade(question, chunk))

    async def agrade(self, question: str, chunk: str) -> Verdict:
        """Async twin of :meth:`grade`."""
        return _ensure(await self._agrade(question, chunk))

    def _grade(self, question: str, chunk: str) -> Any:
        raise NotImplementedError

    async def _agrade(self, question: str, chunk: str) -> Any:
        return self._grade(question, chunk)


def _ensure(result: Any) -> Verdict:
    if isinstance(result, Verdict):
        return result
    return Verdict.malformed(f"judge returned {type(result).__name__}, not a Verdict: {str(result)[:200]!r}")
