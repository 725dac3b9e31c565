"""Structured answer filtering: each call returns ``{query_satisfied, answer}``; unparsable replies are skipped.

Function calling (a real tool call) when ``llm.metadata.is_function_calling_model``, otherwise a text-completion
program that appends the JSON schema to the prompt and parses the reply. Core raises out of the loop on some parse
errors and only supports refine/compact; here a bad reply is reported as a skipped chunk and the loop goes on.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Optional, Tuple

from llama_index.core.bridge.pydantic import ValidationError
from llama_index.core.llms import LLM
from llama_index.core.output_parsers.pydantic import PydanticOutputParser
from llama_index.core.prompts import BasePromptTemplate, SelectorPromptTemplate
from llama_index.core.response_synthesizers.refine import StructuredRefineResponse
from llama_index.core.types import BasePydanticProgram

logger = logging.getLogger(__name__)

ProgramFactory = Callable[[BasePromptTemplate], BasePydanticProgram]
PARSE_ERRORS = (ValidationError, ValueError, TypeError, KeyError)

__all__ = ["StructuredRefineResponse", "build_program", "run_program", "arun_program", "own_copy"]


def own_copy(template: BasePromptTemplate, llm: Optional[LLM]) -> BasePromptTemplate:
    """A private copy of the template the LLM would use (programs set ``output_parser`` on their prompt)."""
    if isinstance(template, SelectorPromptTemplate):
        template = template.select(llm=llm)
    return template.partial_format()


def build_program(template: BasePromptTemplate, llm: LLM, verbose: bool = False) -> BasePydanticProgram:
    """A program returning :class:`StructuredRefineResponse`: tool calling if the LLM supports it, else text JSON."""
    if llm.metadata.is_function_calling_model:
        from llama_index.core.program.function_program import FunctionCallingProgram

        # Naming the tool (not just "required") is what makes llama.cpp's server constrain the reply to the tool's
        # JSON schema; with "required" Qwen2.5-0.5B behind it answered in prose, no tool call, on every chunk.
        return FunctionCallingProgram.from_defaults(
            output_cls=StructuredRefineResponse, llm=llm, prompt=template, verbose=verbose,
            tool_choice=StructuredRefineResponse.__name__,
        )
    from llama_index.core.program.llm_program import LLMTextCompletionProgram

    return LLMTextCompletionProgram.from_defaults(
        output_parser=PydanticOutputParser(output_cls=StructuredRefineResponse),
        llm=llm,
        prompt=template,
        verbose=verbose,
    )


def _check(output: Any) -> Tuple[Optional[StructuredRefineResponse], Optional[str]]:
    if isinstance(output, StructuredRefineResponse):
        return output, None
    if hasattr(output, "query_satisfied") and hasattr(output, "answer"):
        return StructuredRefineResponse(query_satisfied=bool(output.query_satisfied), answer=str(output.answer)), None
    return None, f"expected a StructuredRefineResponse, got {type(output).__name__}: {str(output)[:200]!r}"


def _last(partials: Any) -> Any:
    """The last partial object a streaming program produced (the complete one)."""
    last = None
    for partial in partials:
        last = partial
    return last


async def _alast(partials: Any) -> Any:
    last = None
    async for partial in partials:
        last = partial
    return last


def run_program(
    program: BasePydanticProgram, kwargs: Dict[str, Any], stream: bool = False
) -> Tuple[Optional[StructuredRefineResponse], Optional[str]]:
    """``(reply, None)`` or ``(None, error)`` when the reply could not be parsed. ``stream``: the program streams
    (``stream_call``, as core does with ``streaming=True``) and its last, complete object is the reply."""
    try:
        return _check(_last(program.stream_call(**kwargs)) if stream else program(**kwargs))
    except PARSE_ERRORS as exc:
        logger.warning("structured reply could not be parsed: %s", exc)
        return None, f"{type(exc).__name__}: {exc}"[:500]


async def arun_program(
    program: BasePydanticProgram, kwargs: Dict[str, Any], stream: bool = False
) -> Tuple[Optional[StructuredRefineResponse], Optional[str]]:
    """Async twin of :func:`run_program`."""
    try:
        if stream:
            return _check(await _alast(await program.astream_call(**kwargs)))
        return _check(await program.acall(**kwargs))
    except PARSE_ERRORS as exc:
        logger.warning("structured reply could not be parsed: %s", exc)
        return None, f"{type(exc).__name__}: {exc}"[:500]
