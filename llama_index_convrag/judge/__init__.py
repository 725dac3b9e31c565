"""Judge-guided recursive retrieval: an LLM grades each retrieved chunk (2 answers, 1 relevant but incomplete with a
follow-up question, 0 irrelevant), chunks graded 1 are enriched by searching their follow-up questions, and the whole
search is a tree returned on the response (JSON, Mermaid, PNG)."""

from llama_index_convrag.judge.base import BaseJudge
from llama_index_convrag.judge.events import (
    JudgeChunkGradedEvent,
    JudgeSearchEndEvent,
    JudgeSubAnswerEvent,
    JudgeSubQuestionEvent,
)
from llama_index_convrag.judge.limits import SearchLimits
from llama_index_convrag.judge.llm_judge import LLMJudge
from llama_index_convrag.judge.query_engine import (
    JUDGE_KWARGS,
    JUDGE_OPTIONS,
    JudgeQueryEngine,
    build_judge_synthesizer,
    pop_judge_kwargs,
)
from llama_index_convrag.judge.render import render_png, to_mermaid
from llama_index_convrag.judge.search import SearchCancelled, SearchResult, TreeSearch, enrich, normalize_question
from llama_index_convrag.judge.synthesizer import JudgeSynthesizer, current_message_id, message_scope
from llama_index_convrag.judge.tree import GradedChunk, SearchNode, SearchStats, SearchTree
from llama_index_convrag.judge.verdict import GRADES, JudgeReply, Verdict, verdict_from_args, verdict_from_text

__all__ = [
    "BaseJudge",
    "GRADES",
    "GradedChunk",
    "JUDGE_KWARGS",
    "JUDGE_OPTIONS",
    "JudgeChunkGradedEvent",
    "JudgeQueryEngine",
    "JudgeReply",
    "JudgeSearchEndEvent",
    "JudgeSubAnswerEvent",
    "JudgeSubQuestionEvent",
    "JudgeSynthesizer",
    "LLMJudge",
    "SearchCancelled",
    "SearchLimits",
    "SearchNode",
    "SearchResult",
    "SearchStats",
    "SearchTree",
    "TreeSearch",
    "Verdict",
    "build_judge_synthesizer",
    "current_message_id",
    "enrich",
    "message_scope",
    "normalize_question",
    "pop_judge_kwargs",
    "render_png",
    "to_mermaid",
    "verdict_from_args",
    "verdict_from_text",
]
