"""Judge-guided recursive retrieval: an LLM grades each retrieved chunk (2 answers, 1 relevant but incomplete with a
follow-up question, 0 irrelevant), chunks graded 1 are enriched by searching their follow-up questions, and the whole
search is a tree returned on the response (JSON, Mermaid, PNG). Options travel in one :class:`JudgeOptions`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "BaseJudge": "base",
    "GRADES": "verdict",
    "GradedChunk": "tree",
    "JudgeChunkGradedEvent": "events",
    "JudgeHook": "options",
    "JudgeOptions": "options",
    "JudgeQueryEngine": "query_engine",
    "JudgeReply": "verdict",
    "JudgeSearchEndEvent": "events",
    "JudgeSubAnswerEvent": "events",
    "JudgeSubQuestionEvent": "events",
    "JudgeSynthesizer": "synthesizer",
    "LLMJudge": "llm_judge",
    "SearchCancelled": "search",
    "SearchLimits": "limits",
    "SearchNode": "tree",
    "SearchResult": "search",
    "SearchStats": "tree",
    "SearchTree": "tree",
    "TreeSearch": "search",
    "Verdict": "verdict",
    "build_judge_synthesizer": "query_engine",
    "current_message_id": "synthesizer",
    "enrich": "search",
    "judge_options": "options",
    "message_scope": "synthesizer",
    "normalize_question": "search",
    "render_png": "render",
    "to_mermaid": "render",
    "verdict_from_args": "verdict",
    "verdict_from_text": "verdict",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.judge.base import BaseJudge
    from llama_index_convrag.judge.events import (JudgeChunkGradedEvent, JudgeSearchEndEvent, JudgeSubAnswerEvent,
                                                  JudgeSubQuestionEvent)
    from llama_index_convrag.judge.limits import SearchLimits
    from llama_index_convrag.judge.llm_judge import LLMJudge
    from llama_index_convrag.judge.options import JudgeHook, JudgeOptions, judge_options
    from llama_index_convrag.judge.query_engine import JudgeQueryEngine, build_judge_synthesizer
    from llama_index_convrag.judge.render import render_png, to_mermaid
    from llama_index_convrag.judge.search import SearchCancelled, SearchResult, TreeSearch, enrich, normalize_question
    from llama_index_convrag.judge.synthesizer import JudgeSynthesizer, current_message_id, message_scope
    from llama_index_convrag.judge.tree import GradedChunk, SearchNode, SearchStats, SearchTree
    from llama_index_convrag.judge.verdict import GRADES, JudgeReply, Verdict, verdict_from_args, verdict_from_text
