"""``JudgeQueryEngine``: a ``RetrieverQueryEngine`` whose synthesizer is a :class:`JudgeSynthesizer`.

The retriever (and postprocessors) produce the root chunks; sub-questions use the same retriever. Built by
``ConvRAGIndex.as_query_engine(judge=True, ...)`` or :meth:`JudgeQueryEngine.from_defaults`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.query_engine.retriever_query_engine import RetrieverQueryEngine

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.judge.base import BaseJudge
from llama_index_convrag.judge.limits import SearchLimits
from llama_index_convrag.judge.llm_judge import LLMJudge
from llama_index_convrag.judge.search import TreeSearch
from llama_index_convrag.judge.synthesizer import JudgeSynthesizer
from llama_index_convrag.synthesizers import get_response_synthesizer

# options of the judge itself (the rest go to the synthesizer factory); see build_judge_synthesizer
JUDGE_OPTIONS = frozenset({"judge_llm", "judge_prompt", "max_depth", "max_branching", "max_llm_calls"})
JUDGE_KWARGS = JUDGE_OPTIONS | {"judge"}


def pop_judge_kwargs(kwargs: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Take :data:`JUDGE_KWARGS` out of ``kwargs`` (in place). ``None`` when judging is off (``judge`` absent,
    None or False); else the judge arguments of :func:`build_judge_synthesizer` (``judge=True``: an
    :class:`LLMJudge`; ``judge=<BaseJudge>``: that judge)."""
    judge = kwargs.pop("judge", None)
    options = {k: kwargs.pop(k) for k in sorted(JUDGE_OPTIONS & set(kwargs))}
    if judge is None or judge is False:
        if options:
            raise ArgumentTypeError(f"{sorted(options)} need judge=True")
        return None
    if judge is not True and not isinstance(judge, BaseJudge):
        raise ConfigurationError(f"judge must be True, False or a BaseJudge, got {judge!r}")
    return {**options, "judge": None if judge is True else judge}


def build_judge_synthesizer(
    retriever: BaseRetriever,
    *,
    llm: Optional[LLM],
    judge_llm: Optional[LLM] = None,
    judge: Optional[BaseJudge] = None,
    judge_prompt: Optional[BasePromptTemplate] = None,
    max_depth: Optional[int] = None,
    max_branching: Optional[int] = None,
    max_llm_calls: Optional[int] = None,
    callback_manager: Optional[CallbackManager] = None,
    **synth_kwargs: Any,
) -> JudgeSynthesizer:
    """A :class:`JudgeSynthesizer`: ``judge`` if given, else an :class:`LLMJudge` on ``judge_llm`` (default
    ``llm``); sub-answers and the final answer come from our ``get_response_synthesizer(llm=llm, **synth_kwargs)``
    (sub-answers never stream and never cite)."""
    if judge is not None and (judge_llm is not None or judge_prompt is not None):
        raise ConfigurationError("judge= excludes judge_llm= and judge_prompt= (configure the judge you pass)")
    if judge is None:
        grader = judge_llm if judge_llm is not None else llm
        if grader is None:
            raise ConfigurationError("the judge needs an LLM: pass judge_llm=, llm= or judge= (no default LLM is built)")
        judge = LLMJudge(grader, judge_prompt=judge_prompt)
    given = {"max_depth": max_depth, "max_branching": max_branching, "max_llm_calls": max_llm_calls}
    limits = SearchLimits(**{k: v for k, v in given.items() if v is not None})
    answer_kwargs: Dict[str, Any] = {**synth_kwargs, "streaming": False, "citations": False}
    answerer = get_response_synthesizer(llm=llm, callback_manager=callback_manager, **answer_kwargs)
    final = get_response_synthesizer(llm=llm, callback_manager=callback_manager, **synth_kwargs)
    search = TreeSearch(retriever=retriever, judge=judge, answerer=answerer, limits=limits)
    return JudgeSynthesizer(search=search, synthesizer=final)


class JudgeQueryEngine(RetrieverQueryEngine):
    """Retrieve, judge each chunk, recurse on the gaps, synthesize; ``response.metadata["judge_tree"]``."""

    @classmethod
    def from_defaults(
        cls,
        retriever: BaseRetriever,
        *,
        llm: Optional[LLM],
        node_postprocessors: Optional[List[BaseNodePostprocessor]] = None,
        callback_manager: Optional[CallbackManager] = None,
        **kwargs: Any,
    ) -> "JudgeQueryEngine":
        """``kwargs``: :data:`JUDGE_KWARGS` and the arguments of our ``get_response_synthesizer``."""
        synth = build_judge_synthesizer(retriever, llm=llm, callback_manager=callback_manager, **kwargs)
        return cls(retriever=retriever, response_synthesizer=synth, node_postprocessors=node_postprocessors,
                   callback_manager=callback_manager)
