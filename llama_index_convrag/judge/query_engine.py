"""``JudgeQueryEngine``: a ``RetrieverQueryEngine`` whose synthesizer is a :class:`JudgeSynthesizer`.

The retriever (and postprocessors) produce the root chunks; sub-questions use the same retriever. Built by
``ConvRAGIndex.as_query_engine(judge=...)`` or :meth:`JudgeQueryEngine.from_defaults` (``judge``: ``True``, a
``BaseJudge`` or a :class:`~.options.JudgeOptions`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine.retriever_query_engine import RetrieverQueryEngine

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.judge.llm_judge import LLMJudge
from llama_index_convrag.judge.options import JudgeArg, JudgeOptions, judge_options, refuse_old_keywords
from llama_index_convrag.judge.search import TreeSearch
from llama_index_convrag.judge.synthesizer import JudgeSynthesizer
from llama_index_convrag.synthesizers import get_response_synthesizer

def build_judge_synthesizer(
    retriever: BaseRetriever,
    *,
    llm: Optional[LLM],
    options: JudgeOptions,
    callback_manager: Optional[CallbackManager] = None,
    **synth_kwargs: Any,
) -> JudgeSynthesizer:
    """A :class:`JudgeSynthesizer` for ``options``: its ``judge`` if given, else an :class:`LLMJudge` on
    ``judge_llm`` (default ``llm``); sub-answers and the final answer come from our
    ``get_response_synthesizer(llm=llm, **synth_kwargs)`` (sub-answers never stream and never cite)."""
    refuse_old_keywords(synth_kwargs)
    judge = options.judge
    if judge is None:
        grader = options.judge_llm if options.judge_llm is not None else llm
        if grader is None:
            raise ConfigurationError("the judge needs an LLM: pass JudgeOptions(judge_llm=...), llm= or a judge "
                                     "(no default LLM is built)")
        judge = LLMJudge(grader, judge_prompt=options.judge_prompt)
    answer_kwargs: Dict[str, Any] = {**synth_kwargs, "streaming": False, "citations": False}
    answerer = get_response_synthesizer(llm=llm, callback_manager=callback_manager, **answer_kwargs)
    final = get_response_synthesizer(llm=llm, callback_manager=callback_manager, **synth_kwargs)
    search = TreeSearch(retriever=retriever, judge=judge, answerer=answerer, limits=options.limits)
    return JudgeSynthesizer(search=search, synthesizer=final)


class JudgeQueryEngine(RetrieverQueryEngine):
    """Retrieve, judge each chunk, recurse on the gaps, synthesize; ``response.metadata["judge_tree"]``."""

    @classmethod
    def from_defaults(
        cls,
        retriever: BaseRetriever,
        *,
        llm: Optional[LLM],
        judge: JudgeArg = True,
        node_postprocessors: Optional[List[BaseNodePostprocessor]] = None,
        callback_manager: Optional[CallbackManager] = None,
        **kwargs: Any,
    ) -> "JudgeQueryEngine":
        """``judge``: ``True``, a ``BaseJudge`` or a :class:`JudgeOptions`; ``kwargs``: the arguments of our
        ``get_response_synthesizer``."""
        options = judge_options(judge)
        if options is None:
            raise ConfigurationError(f"JudgeQueryEngine needs a judge: True, a BaseJudge or a JudgeOptions, got {judge!r}")
        synth = build_judge_synthesizer(retriever, llm=llm, options=options, callback_manager=callback_manager,
                                        **kwargs)
        return cls(retriever=retriever, response_synthesizer=synth, node_postprocessors=node_postprocessors,
                   callback_manager=callback_manager)
