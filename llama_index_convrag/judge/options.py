"""``JudgeOptions``: every option of judge-guided answers in one value, and the engine hook that carries them.

``as_query_engine(judge=...)`` and the chat engine's ``AnswerOptions(judge=...)`` take
one ``judge`` argument: ``True`` (an :class:`~.llm_judge.LLMJudge` on the answering LLM, default limits), a
:class:`~.base.BaseJudge`, or a :class:`JudgeOptions`. :class:`JudgeHook` is what the chat engine runs around each
answer (the engine's one extension point: ``AnswerOptions.hooks``): it scopes the judge's events to the turn's assistant
message id and puts the search tree on the turn record.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.judge.base import BaseJudge
from llama_index_convrag.judge.limits import SearchLimits
from llama_index_convrag.judge.synthesizer import message_scope

OLD_KEYWORDS = ("judge_llm", "judge_prompt", "max_depth", "max_branching", "max_llm_calls")
"""Keywords that were judge options before :class:`JudgeOptions`; given to an engine factory, they are refused."""


@dataclass(frozen=True)
class JudgeOptions:
    """How judge-guided answers grade and recurse. ``judge``: the grader (``None``: an ``LLMJudge`` on ``judge_llm``,
    else on the answering LLM, with ``judge_prompt``); ``limits``: depth, branching and LLM-call limits."""

    judge: Optional[BaseJudge] = None
    judge_llm: Optional[LLM] = None
    judge_prompt: Optional[BasePromptTemplate] = None
    limits: SearchLimits = SearchLimits()

    def __post_init__(self) -> None:
        if self.judge is not None and not isinstance(self.judge, BaseJudge):
            raise ConfigurationError(f"JudgeOptions.judge must be a BaseJudge or None, got {self.judge!r}")
        if self.judge is not None and (self.judge_llm is not None or self.judge_prompt is not None):
            raise ConfigurationError("judge= excludes judge_llm= and judge_prompt= (configure the judge you pass)")
        if not isinstance(self.limits, SearchLimits):
            raise ConfigurationError(f"JudgeOptions.limits must be a SearchLimits, got {self.limits!r}")


JudgeArg = Union[None, bool, BaseJudge, JudgeOptions]


def judge_options(judge: JudgeArg) -> Optional[JudgeOptions]:
    """The options a ``judge=`` argument asks for (``None``: judging off)."""
    if judge is None or judge is False:
        return None
    if judge is True:
        return JudgeOptions()
    if isinstance(judge, BaseJudge):
        return JudgeOptions(judge=judge)
    if isinstance(judge, JudgeOptions):
        return judge
    raise ConfigurationError(f"judge must be True, False, None, a BaseJudge or a JudgeOptions, got {judge!r}")


def refuse_old_keywords(given: Dict[str, Any]) -> None:
    """Name the old judge keywords in ``given`` and the one argument that replaces them."""
    old = sorted(k for k in given if k in OLD_KEYWORDS)
    if old:
        raise ArgumentTypeError(f"{old} are options of judge=JudgeOptions(...) "
                                "(judge_llm, judge_prompt, limits=SearchLimits(max_depth, max_branching, max_llm_calls))")


class JudgeHook:
    """Runs around a judge-guided answer: the judge's events carry the assistant message id, and the search tree
    (``response.metadata["judge_tree"]``) goes to the turn record's ``judge_tree``."""

    def scope(self, assistant_message_id: str) -> AbstractContextManager:
        return message_scope(assistant_message_id)

    def record_fields(self, response: Any) -> Dict[str, Any]:
        meta = getattr(response, "metadata", None)
        tree = meta.get("judge_tree") if isinstance(meta, dict) else None
        return {"judge_tree": None if tree is None else tree.to_dict()}
