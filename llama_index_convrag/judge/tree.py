"""The search tree of a judge-guided retrieval: question -> chunks with grades -> sub-questions -> their chunks and
answers. Plain dataclasses, JSON round-trip (``to_dict`` / ``from_dict``), filled in place while the search runs so a
partial tree survives cancellation. Rendering is in :mod:`llama_index_convrag.judge.render`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Iterator, List, Optional

from llama_index.core.schema import NodeWithScore

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.judge.verdict import ANSWERS, IRRELEVANT, PARTIAL, Verdict

PREVIEW_CHARS = 300
TREE_STATUSES = ("running", "complete", "cancelled", "error")
# answers: graded 2; enriched: graded 1 and its sub-answer attached; kept: graded 1, not expanded (note says why);
# dropped: graded 0; ungraded: the call limit or a cancellation came first (kept for synthesis, as plain RAG would)
CHUNK_STATUSES = ("pending", "answers", "enriched", "kept", "dropped", "ungraded")
KEPT_STATUSES = ("answers", "enriched", "kept", "ungraded")


def doc_id_of(nws: NodeWithScore) -> str:
    """The document a chunk comes from: its ``ref_doc_id``, else its node id."""
    ref = nws.node.ref_doc_id
    return ref if ref is not None else nws.node.node_id


@dataclass
class GradedChunk:
    """One retrieved chunk under a question, with its grade and, for grade 1, the sub-question it led to."""

    node_id: str
    doc_id: str
    score: Optional[float]
    preview: str
    grade: Optional[int] = None
    reason: str = ""
    follow_up: Optional[str] = None
    error: Optional[str] = None
    status: str = "pending"
    note: Optional[str] = None
    child: Optional["SearchNode"] = None

    @classmethod
    def from_node(cls, nws: NodeWithScore) -> "GradedChunk":
        text = nws.node.get_content()
        return cls(node_id=nws.node.node_id, doc_id=doc_id_of(nws), score=nws.score, preview=text[:PREVIEW_CHARS])

    def apply(self, verdict: Verdict) -> None:
        self.grade, self.reason, self.follow_up, self.error = (
            verdict.grade, verdict.reason, verdict.follow_up, verdict.error)
        self.status = {ANSWERS: "answers", PARTIAL: "kept", IRRELEVANT: "dropped"}[verdict.grade]

    @property
    def kept(self) -> bool:
        return self.status in KEPT_STATUSES

    def to_dict(self) -> Dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "child"}
        data["child"] = None if self.child is None else self.child.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "GradedChunk":
        data = _checked(cls, data)
        child = data.pop("child", None)
        return cls(**data, child=None if child is None else SearchNode.from_dict(child))


@dataclass
class SearchNode:
    """One question (the user's at depth 0, a follow-up below), the chunks retrieved for it and, below the root,
    the answer attached to the parent chunk. ``path`` is ``"0"``, ``"0.3"``, ``"0.3.1"``: chunk indexes from the
    root. ``seen`` lists chunks retrieved again but not re-graded (already graded elsewhere in the tree)."""

    question: str
    depth: int
    path: str
    chunks: List[GradedChunk] = field(default_factory=list)
    answer: Optional[str] = None
    seen: List[str] = field(default_factory=list)

    def walk(self) -> Iterator["SearchNode"]:
        """This node and every node below it, depth first."""
        yield self
        for chunk in self.chunks:
            if chunk.child is not None:
                yield from chunk.child.walk()

    @property
    def answered_here(self) -> bool:
        return any(c.grade == ANSWERS for c in self.chunks)

    def to_dict(self) -> Dict[str, Any]:
        return {"question": self.question, "depth": self.depth, "path": self.path, "answer": self.answer,
                "seen": list(self.seen), "chunks": [c.to_dict() for c in self.chunks]}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "SearchNode":
        data = _checked(cls, data)
        chunks = [GradedChunk.from_dict(c) for c in data.pop("chunks", [])]
        return cls(**data, chunks=chunks)


@dataclass
class SearchStats:
    """What one search spent. Prompt tokens are counted with the synthesizers' tokenizer (tiktoken by default)."""

    judge_calls: int = 0
    answer_calls: int = 0
    judge_prompt_tokens: int = 0
    answer_prompt_tokens: int = 0
    retrievals: int = 0
    sub_questions: int = 0
    malformed: int = 0

    @property
    def llm_calls(self) -> int:
        return self.judge_calls + self.answer_calls

    def to_dict(self) -> Dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["llm_calls"] = self.llm_calls
        return data

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "SearchStats":
        return cls(**_checked(cls, {k: v for k, v in data.items() if k != "llm_calls"}))


@dataclass
class SearchTree:
    """The whole search. ``status`` is one of :data:`TREE_STATUSES`; ``message_id`` ties it to a chat turn."""

    root: SearchNode
    limits: Dict[str, Any]
    status: str = "running"
    message_id: Optional[str] = None
    stats: SearchStats = field(default_factory=SearchStats)
    error: Optional[str] = None

    def nodes(self) -> List[SearchNode]:
        return list(self.root.walk())

    def chunks(self) -> List[GradedChunk]:
        return [c for n in self.root.walk() for c in n.chunks]

    def evidence_doc_ids(self) -> List[str]:
        """Documents of every kept chunk anywhere in the tree (they reach the answer directly or through a
        sub-answer), in first-seen order."""
        out: List[str] = []
        for chunk in self.chunks():
            if chunk.kept and chunk.doc_id not in out:
                out.append(chunk.doc_id)
        return out

    def to_dict(self) -> Dict[str, Any]:
        return {"status": self.status, "message_id": self.message_id, "error": self.error, "limits": self.limits,
                "stats": self.stats.to_dict(), "root": self.root.to_dict()}

    def to_json(self, indent: Optional[int] = None) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "SearchTree":
        data = _checked(cls, data)
        if data.get("status") not in TREE_STATUSES:
            raise ConfigurationError(f"status must be one of {list(TREE_STATUSES)}, got {data.get('status')!r}")
        return cls(root=SearchNode.from_dict(data["root"]), limits=dict(data["limits"]), status=data["status"],
                   message_id=data.get("message_id"), stats=SearchStats.from_dict(data.get("stats", {})),
                   error=data.get("error"))

    @classmethod
    def from_json(cls, text: str) -> "SearchTree":
        return cls.from_dict(json.loads(text))


def _checked(cls: type, data: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of ``data`` after checking it names only fields of ``cls`` (a clear error for foreign JSON)."""
    if not isinstance(data, dict):
        raise ConfigurationError(f"{cls.__name__} expects a JSON object, got {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigurationError(f"unknown {cls.__name__} fields {unknown}; accepted: {sorted(names)}")
    return dict(data)
