"""The memory API: what the assistant remembers for the caller.

``GET /v1/memory`` says which parts of memory the server's turns use (and how many writes this process has queued
or failed). A conversation's running summary: read
(``GET .../summary``, every version with ``.../summary/versions``), edit (``PUT``: a new version, refused over the
cap) and clear (``DELETE``: every version). The caller's facts: list (``GET /v1/memory/facts``, ``history=true``
for replaced and retracted ones too), delete one (``DELETE /v1/memory/facts/{id}``, with its history) or all. What a
turn recalled is in its turn record (``GET /v1/messages/{id}/turn``: ``memory`` and ``context``).

Every route needs a key with the ``chat`` scope (the scope of one's own conversations: memory is theirs too) and acts
on the caller's own objects: another user's conversation or fact reads exactly as an unknown id (404). With memory
off the routes still read, edit and delete what the store holds. Each route is a few quick store calls (sync: FastAPI
runs it in its thread pool).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from fastapi import APIRouter, Query, Response

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.access import owned_conversation
from llama_index_convrag.serve.deps import ChatUser, State
from llama_index_convrag.serve.errors import APIError, not_found
from llama_index_convrag.serve.models import (Deleted, FactList, MemoryStatus, SummaryEdit, SummaryOut,
                                              SummaryVersionList, SummaryVersionOut, doc)
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.storage.conversation.memory_rows import Fact, SummaryVersion

router = APIRouter(prefix="/v1", tags=["memory"])


def summary_view(version: SummaryVersion) -> Dict[str, Any]:
    view = version.to_dict()
    view.pop("conversation_id", None)
    return view


def fact_view(fact: Fact) -> Dict[str, Any]:
    return fact.to_dict()


def _summary(state: ServeState, user: str, conversation_id: str) -> Dict[str, Any]:
    memory = state.memory_view
    versions = memory.summary_versions(user, conversation_id)
    return {"conversation_id": conversation_id, "summary": summary_view(versions[-1]) if versions else None,
            "versions": len(versions), "max_tokens": memory.options.summary.max_tokens}


@router.get("/memory", responses=doc(MemoryStatus, 403))
def memory_status(state: State, principal: ChatUser) -> Dict[str, Any]:
    """Which parts of memory this server's turns use, their limits, and this process's writes behind the turns."""
    memory = state.memory_view
    o, writer = memory.options, memory.writer
    return {"parts": state.memory.parts if state.memory is not None else [],
            "summary_max_tokens": o.summary.max_tokens, "recall_k": o.episodic.k, "window": o.episodic.window,
            "pending_writes": writer.pending, "failed_writes": writer.failed}


@router.get("/conversations/{conversation_id}/summary", responses=doc(SummaryOut, 403, 404))
def get_summary(conversation_id: str, state: State, principal: ChatUser) -> Dict[str, Any]:
    """The conversation's current summary (null when there is none yet)."""
    owned_conversation(state, conversation_id, principal.user_id)
    return _summary(state, principal.user_id, conversation_id)


@router.get("/conversations/{conversation_id}/summary/versions", responses=doc(SummaryVersionList, 403, 404))
def get_summary_versions(conversation_id: str, state: State, principal: ChatUser) -> Dict[str, Any]:
    """Every version of the conversation's summary, oldest first."""
    owned_conversation(state, conversation_id, principal.user_id)
    return {"data": [summary_view(v) for v in state.memory_view.summary_versions(principal.user_id,
                                                                                   conversation_id)]}


@router.put("/conversations/{conversation_id}/summary", responses=doc(SummaryVersionOut, 400, 403, 404))
def edit_summary(conversation_id: str, body: SummaryEdit, state: State, principal: ChatUser) -> Dict[str, Any]:
    """Replace the summary with ``text``, kept as a new version (the next fold starts from it); 400
    ``summary_too_long`` over the cap (nothing is cut from what a user wrote)."""
    owned_conversation(state, conversation_id, principal.user_id)
    if not body.text.strip():
        raise APIError(400, "empty_summary", "the summary text is blank; DELETE the summary to clear it", "text")
    try:
        version = state.memory_view.edit_summary(principal.user_id, conversation_id, body.text)
    except ConfigurationError as e:  # over the cap: the message names both numbers
        raise APIError(400, "summary_too_long", str(e), "text") from e
    return summary_view(version)


@router.delete("/conversations/{conversation_id}/summary", status_code=204, responses=doc(None, 403, 404))
def clear_summary(conversation_id: str, state: State, principal: ChatUser) -> Response:
    """Delete every version of the summary (a later fold starts a new one from the messages after the window)."""
    owned_conversation(state, conversation_id, principal.user_id)
    state.memory_view.clear_summary(principal.user_id, conversation_id)
    return Response(status_code=204)


@router.get("/memory/facts", responses=doc(FactList, 403))
def list_facts(state: State, principal: ChatUser,
               history: bool = Query(default=False, description="Replaced and retracted facts too.")
               ) -> Dict[str, Any]:
    """Your facts, oldest first: what you said about yourself, each with the message it came from."""
    facts = state.memory_view.facts(principal.user_id, include_history=history)
    return {"data": [fact_view(f) for f in facts]}


@router.delete("/memory/facts/{fact_id}", status_code=204, responses=doc(None, 403, 404))
def delete_fact(fact_id: str, state: State, principal: ChatUser) -> Response:
    """Delete one of your facts with its history (what it replaced and what replaced it)."""
    if not state.memory_view.delete_fact(principal.user_id, fact_id):
        raise not_found("fact", fact_id)
    return Response(status_code=204)


@router.delete("/memory/facts", responses=doc(Deleted, 400, 403))
def forget_facts(state: State, principal: ChatUser,
                 confirm: Optional[bool] = Query(default=None, description="Must be true: every fact goes.")
                 ) -> Dict[str, Any]:
    """Delete every fact of yours (their history too); how many rows went."""
    if confirm is not True:
        raise APIError(400, "confirm_needed", "this deletes every fact of yours; send ?confirm=true", "confirm")
    return {"deleted": state.memory_view.forget_facts(principal.user_id)}
