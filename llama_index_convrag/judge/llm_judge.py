"""``LLMJudge``: an LLM grades each chunk. Function calling (the ``grade_chunk`` tool, named in ``tool_choice``) when
the LLM supports it, else a text completion whose reply is parsed (the first JSON object, else ``grade: N`` lines).
A reply without a tool call falls back to parsing its text; anything unreadable is grade 0 with the reason recorded.

Naming the tool, not just requiring one, is what makes llama.cpp's server constrain the reply to the tool's schema:
with ``tool_choice="required"`` Qwen2.5-0.5B behind it wrote the call as fenced prose
(``{"name": "grade_chunk", "arguments": {...}}``, which the text fallback now unwraps) on every chunk."""

from __future__ import annotations

from typing import Any, Optional

from llama_index.core.base.llms.types import ChatResponse
from llama_index.core.llms import LLM
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.tools import FunctionTool

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.judge.base import BaseJudge
from llama_index_convrag.judge.verdict import JudgeReply, Verdict, verdict_from_args, verdict_from_text

TOOL_NAME = "grade_chunk"
_TOOL_PARSE_ERRORS = (ValueError, TypeError, KeyError)


def _grade_chunk(**kwargs: Any) -> Any:
    return kwargs


class LLMJudge(BaseJudge):
    """Grades with ``llm``. ``function_calling=None`` follows ``llm.metadata.is_function_calling_model``."""

    def __init__(
        self,
        llm: LLM,
        *,
        judge_prompt: Optional[BasePromptTemplate] = None,
        function_calling: Optional[bool] = None,
    ) -> None:
        if llm is None:
            raise ConfigurationError("LLMJudge needs an LLM: pass llm=... (no default LLM is built)")
        super().__init__(judge_prompt)
        self._llm = llm
        self.function_calling = (
            llm.metadata.is_function_calling_model if function_calling is None else function_calling
        )
        if self.function_calling and not isinstance(llm, FunctionCallingLLM):
            raise ConfigurationError(f"function_calling=True needs a FunctionCallingLLM, got {type(llm).__name__}; "
                             "pass function_calling=False to parse text replies")
        self._tool = FunctionTool.from_defaults(
            fn=_grade_chunk, name=TOOL_NAME, description=JudgeReply.__doc__, fn_schema=JudgeReply
        )

    @property
    def llm(self) -> LLM:
        return self._llm

    def _grade(self, question: str, chunk: str) -> Verdict:
        prompt = self.prompt_text(question, chunk)
        if self.function_calling:
            return self._from_chat(self._llm.chat_with_tools(  # type: ignore[attr-defined]
                [self._tool], user_msg=prompt, tool_required=True, tool_choice=TOOL_NAME))
        return verdict_from_text(self._llm.complete(prompt).text)

    async def _agrade(self, question: str, chunk: str) -> Verdict:
        prompt = self.prompt_text(question, chunk)
        if self.function_calling:
            reply = await self._llm.achat_with_tools(  # type: ignore[attr-defined]
                [self._tool], user_msg=prompt, tool_required=True, tool_choice=TOOL_NAME)
            return self._from_chat(reply)
        return verdict_from_text((await self._llm.acomplete(prompt)).text)

    def _from_chat(self, response: ChatResponse) -> Verdict:
        """The first tool call's arguments; the message text when the model answered without a call."""
        try:
            calls = self._llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)  # type: ignore[attr-defined]
        except _TOOL_PARSE_ERRORS as exc:
            return Verdict.malformed(f"tool call could not be read: {type(exc).__name__}: {exc}"[:500])
        if calls:
            return verdict_from_args(calls[0].tool_kwargs)
        return verdict_from_text(response.message.content or "")
