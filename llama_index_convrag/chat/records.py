"""``TurnRecord``: everything one turn did, JSON-serialisable so evaluation can replay it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.storage.conversation.base import STATUSES

TURN_STATUSES = frozenset(STATUSES | {"no_docs"})
"""A turn's status: its assistant message's (``ConversationStore`` statuses), or ``no_docs`` (nothing retrieved,
the fixed reply was given; the message itself is ``complete``)."""


def copy_json(value: Any) -> Any:
    """A copy of nested dicts and lists; other values (str, numbers, None, bool) are immutable and shared."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    if isinstance(value, tuple):
        return tuple(copy_json(v) for v in value)
    return value


@dataclass
class TurnRecord:
    """One turn. ``retrieved_ids`` maps each stage (``retrieve``, each postprocessor, ``budget``) to node ids, and
    ``final`` to the document ids (``ref_doc_id``, else node id) of the context the answer saw, in rank order:
    what :mod:`llama_index_convrag.evaluation.conversation` scores."""

    conversation_id: str
    user_message_id: str
    assistant_message_id: str
    original_question: str
    retrieval_query: Optional[str] = None
    synthesis_query: Optional[str] = None
    rewrite_strategy: Optional[str] = None
    rewrite_used_llm: bool = False
    rewrite_latency_ms: float = 0.0
    rewrite_fallback_reason: Optional[str] = None
    rewrite_skipped_reason: Optional[str] = None
    rewrite_cache_hit: bool = False
    rewrite_explanation: Optional[Dict[str, Any]] = None
    """Why the rewrite read as it did (``contextual``: the history terms added, their weights and reasons, topic
    shift, the fusion weights; :meth:`~llama_index_convrag.conversational.contextualize.Contextualized.explain`)."""
    retrieved_ids: Dict[str, List[str]] = field(default_factory=dict)
    trim_report: Optional[Dict[str, Any]] = None
    answer: str = ""
    citations: List[Dict[str, Any]] = field(default_factory=list)
    status: str = "pending"
    error: Optional[str] = None
    streaming: bool = False
    started_at: float = 0.0
    finished_at: Optional[float] = None
    judge_tree: Optional[Dict[str, Any]] = None  # SearchTree.to_dict() when the answer was judge-guided
    answer_source: Optional[str] = None
    """Which answer is shown (``chat.fallback.ANSWER_SOURCES``): ``llm``, ``llm_retry_without_citations`` or
    ``extractive_fallback`` (the LLM's answer was empty or only citation markers), ``no_llm``; None before an
    answer (no passages and a fixed reply, an error)."""
    citation_mode: Optional[str] = None
    """Who placed the answer's ``[n]`` markers (``synthesizers.citations.CITATION_MODES``): ``inline``, the answer's
    writer (the LLM, or the extractive answer's quotes); ``aligned``, matched to the passages after the LLM answered
    without them (``citation_mode="aligned"``, or the retry of ``llm_retry_without_citations``); None when the answer
    is not cited."""
    answer_completion: Optional[Dict[str, Any]] = None
    """A short answer shown as its passage writes it (``synthesizers.completion``: ``answer``, what the LLM wrote;
    ``shown``; ``passage``, 1-based): "2015" shown as "April 29, 2015"; None when the answer was not widened."""
    grounding: Optional[Dict[str, Any]] = None
    """Answer sentences no passage supports (``synthesizers.grounding.grounding_record``: ``method``,
    ``support_share``, ``judged``, ``unsupported``); None when there was no answer or no passage to check."""
    warnings: List[str] = field(default_factory=list)
    """What went wrong without stopping the turn: a reranker that failed (its order kept), an intermediate LLM
    call cut at its output limit, a judge that found no passage relevant."""
    memory: Optional[Dict[str, Any]] = None
    """The turn's memory (``LoadedMemory.to_record``: the summary version, the facts, a core ``Memory``'s blocks,
    the recalled messages with their positions, dates, scores and the searches that found them, ``recalled_kept``:
    those the budget kept, and why a part was skipped); None without memory."""
    context: Optional[Dict[str, Any]] = None
    """The assembled context of a turn with memory (``chat.memory_step.MemoryFit.context_record``): every kept
    block's items in prompt order, the memory text and where it went (``placement``), so the turn can be replayed as
    the model saw it; None without memory."""

    def to_dict(self) -> Dict[str, Any]:
        """A copy as plain JSON types (what ``dataclasses.asdict`` gives, without its per-leaf ``deepcopy``)."""
        return {f.name: copy_json(getattr(self, f.name)) for f in fields(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "TurnRecord":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigurationError(f"unknown TurnRecord fields {unknown}; accepted: {sorted(names)}")
        return cls(**data)
