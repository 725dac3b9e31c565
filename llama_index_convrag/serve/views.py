"""What clients see of stored objects and turn events: documents by their name inside the knowledge base (never a
server path), sources numbered from 1 everywhere (as the answer's ``[n]`` markers), and errors without internals.

The store keeps a citation's ``source_index`` as the engine wrote it (the position in the answer's source nodes,
from 0); every view here shows ``source_index + 1``, the number of the ``[n]`` marker that cites it and of the
reference the ``retrieval`` event lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index_convrag.storage.conversation.base import Citation, Message
from llama_index_convrag.storage.conversation.recovery import ABANDONED_ERROR

#: metadata keys that hold server paths: never shown (the document's name is shown instead)
PATH_KEYS = frozenset({"file_path", "doc_id", "ref_doc_id"})
#: stored error texts the server itself writes for people (shown as they are; any other is the engine's)
PUBLIC_ERRORS = frozenset({ABANDONED_ERROR})


@dataclass(frozen=True)
class DocumentNames:
    """A document id (the file's server path) -> its name inside a knowledge base: the path below the first of
    ``roots`` holding it, else the file's name."""

    roots: Tuple[str, ...] = ()

    def __call__(self, doc_id: Optional[str]) -> Optional[str]:
        if doc_id is None:
            return None
        for root in self.roots:
            prefix = root.rstrip("/") + "/"
            if doc_id.startswith(prefix):
                return doc_id[len(prefix):]
        return doc_id.rsplit("/", 1)[-1]


def source_number(index: Optional[int]) -> Optional[int]:
    """A stored ``source_index`` (from 0) as the number clients see (from 1)."""
    return None if index is None else int(index) + 1


def public_citation(c: Citation, names: DocumentNames) -> Dict[str, Any]:
    return {"source_index": source_number(c.source_index), "marker": c.marker, "node_id": c.node_id,
            "document": names(c.ref_doc_id), "score": c.score, "text": c.text, "span": c.span}


def reference_view(ref: Dict[str, Any], names: DocumentNames) -> Dict[str, Any]:
    """A retrieved passage of the ``retrieval`` event (numbered from 1 already) with its document's name."""
    meta = {k: v for k, v in (ref.get("metadata") or {}).items() if k not in PATH_KEYS}
    return {"source_index": ref["source_index"], "node_id": ref["node_id"], "document": names(ref["ref_doc_id"]),
            "score": ref["score"], "text": ref["text"], "metadata": meta}


def public_error(message: Message) -> Optional[str]:
    """A stored error as clients see it: the server's own texts as they are; the engine's (an exception's type and
    text) replaced by a pointer to the server log, where the turn's failure is logged under the message id."""
    if message.error is None or message.error in PUBLIC_ERRORS:
        return message.error
    return f"the answer failed (error id {message.id}; the server log has the details)"


def message_view(m: Message) -> Dict[str, Any]:
    return {"id": m.id, "conversation_id": m.conversation_id, "role": m.role, "content": m.content,
            "status": m.status, "error": public_error(m), "created_at": m.created_at, "updated_at": m.updated_at,
            "reply_to": m.reply_to, "version": m.version, "superseded_by": m.superseded_by}


def record_view(record: Dict[str, Any], names: DocumentNames) -> Dict[str, Any]:
    """A turn record as clients see it: citations numbered from 1 with document names, the final document ids as
    names, the engine's error text replaced as :func:`public_error` does."""
    out = dict(record)
    out["citations"] = [public_citation(Citation.from_dict(c), names) for c in record.get("citations") or []]
    retrieved = dict(record.get("retrieved_ids") or {})
    if "final" in retrieved:
        retrieved["final"] = [names(d) for d in retrieved["final"]]
    out["retrieved_ids"] = retrieved
    if out.get("error") is not None and out["error"] not in PUBLIC_ERRORS:
        out["error"] = f"the answer failed (error id {record.get('assistant_message_id')}; the server log has the " \
                       "details)"
    return out


def event_view(name: str, data: Dict[str, Any], names: DocumentNames) -> Dict[str, Any]:
    """A turn event as clients see it (references and citations with document names)."""
    if name == "retrieval":
        return {**data, "references": [reference_view(r, names) for r in data.get("references") or []]}
    if name == "done":
        return {**data, "citations": [_citation_dict_view(c, names) for c in data.get("citations") or []]}
    return data


def _citation_dict_view(c: Dict[str, Any], names: DocumentNames) -> Dict[str, Any]:
    """A ``done`` event's citation (``turns.done_data``: as stored) numbered from 1, with its document's name."""
    return public_citation(Citation.from_dict(c), names)


def versions_of(messages: Sequence[Message]) -> Dict[str, List[str]]:
    """User message id -> the ids of its answers, oldest first."""
    versions: Dict[str, List[str]] = {}
    for m in messages:
        if m.role == "assistant" and m.reply_to is not None:
            versions.setdefault(m.reply_to, []).append(m.id)
    return versions
