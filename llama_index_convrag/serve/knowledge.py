"""``/v1/knowledge-bases``: knowledge bases with their members and documents.

Readers list and read the bases they have a role in (and their documents); editors also add and remove documents;
the owner also renames, shares and deletes. A base one has no role in answers 404, as an unknown id; a role too
weak answers 403 ``insufficient_role``. Making a base needs a key with the ``edit`` scope, changing one too.
"""

from __future__ import annotations

from typing import Any, Dict, List

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from llama_index_convrag.serve.access import kb_for, readable_kb
from llama_index_convrag.serve.deps import ChatUser, EditUser, State
from llama_index_convrag.serve.documents import DocumentBackend
from llama_index_convrag.serve.errors import APIError, internal_error, not_found
from llama_index_convrag.serve.models import (DocumentList, DocumentPut, KnowledgeBaseList, KnowledgeBaseOut,
                                              KnowledgeBaseUpdate, MemberList, MemberOut, MemberRole,
                                              NewKnowledgeBase, doc)
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.storage.conversation.accounts import Principal
from llama_index_convrag.storage.conversation.knowledge import KnowledgeBase

router = APIRouter(prefix="/v1/knowledge-bases", tags=["knowledge bases"])
#: the model id of the server's own knowledge base; another base's is ``convrag/<name>``
MODEL_PREFIX = "convrag"


def model_id(state: ServeState, kb: KnowledgeBase) -> str:
    return state.model_name if _is_default(state, kb) else f"{MODEL_PREFIX}/{kb.name}"


def _is_default(state: ServeState, kb: KnowledgeBase) -> bool:
    return state.default_kb is not None and kb.id == state.default_kb.id


def kb_view(state: ServeState, kb: KnowledgeBase, role: str) -> Dict[str, Any]:
    return {**kb.to_dict(), "role": role, "default": _is_default(state, kb), "model": model_id(state, kb)}


def visible(state: ServeState, principal: Principal) -> List[Dict[str, Any]]:
    """The knowledge bases ``principal`` may read (an admin: all, as owner), by name."""
    if principal.can("admin"):
        return [kb_view(state, kb, "owner") for kb in state.store.list_knowledge_bases()]
    return [kb_view(state, kb, role) for kb, role in state.store.knowledge_bases_of(principal.user_id)]


def _backend(state: ServeState) -> DocumentBackend:
    if state.documents is None:
        raise APIError(404, "no_documents", "this server was started without a document index")
    return state.documents


@router.get("", responses=doc(KnowledgeBaseList))
def list_knowledge_bases(state: State, principal: ChatUser) -> Dict[str, Any]:
    return {"data": visible(state, principal)}


@router.post("", status_code=201, responses=doc(KnowledgeBaseOut, 400, 403))
def create_knowledge_base(body: NewKnowledgeBase, state: State, principal: EditUser) -> Dict[str, Any]:
    backend = _backend(state)
    kb = state.store.create_knowledge_base(body.name, principal.user_id, description=body.description)
    try:
        backend.create(kb, body.analyzer)
    except Exception as e:
        state.store.delete_knowledge_base(kb.id)
        raise internal_error("creating the knowledge base's collection", e) from e
    return kb_view(state, kb, "owner")


@router.get("/{kb_id}", responses=doc(KnowledgeBaseOut, 404))
def get_knowledge_base(kb_id: str, state: State, principal: ChatUser) -> Dict[str, Any]:
    kb, role = readable_kb(state, kb_id, principal)
    return kb_view(state, kb, role)


@router.patch("/{kb_id}", responses=doc(KnowledgeBaseOut, 400, 403, 404))
def update_knowledge_base(kb_id: str, body: KnowledgeBaseUpdate, state: State, principal: EditUser
                          ) -> Dict[str, Any]:
    kb = kb_for(state, kb_id, principal, "owner")
    updated = state.store.update_knowledge_base(kb.id, name=body.name, description=body.description)
    if updated is None:
        raise not_found("knowledge base", kb_id)
    if _is_default(state, updated):
        state.default_kb = updated
    return kb_view(state, updated, "owner")


@router.delete("/{kb_id}", status_code=204, responses=doc(None, 400, 403, 404))
def delete_knowledge_base(kb_id: str, state: State, principal: EditUser) -> Response:
    kb = kb_for(state, kb_id, principal, "owner")
    if _is_default(state, kb):
        raise APIError(400, "default_knowledge_base", f"{kb.name!r} is the server's own knowledge base (the corpus "
                                                      "'convrag serve' ingests); it cannot be deleted here")
    _backend(state).drop(kb)
    state.store.delete_knowledge_base(kb.id)
    forget = getattr(state.engine_for, "forget", None)
    if forget is not None:
        forget(kb.collection)
    return Response(status_code=204)


# --- members ---------------------------------------------------------------------------------------------------
@router.get("/{kb_id}/members", responses=doc(MemberList, 404))
def list_members(kb_id: str, state: State, principal: ChatUser) -> Dict[str, Any]:
    kb, _ = readable_kb(state, kb_id, principal)
    return {"data": [m.to_dict() for m in state.store.members(kb.id)]}


@router.put("/{kb_id}/members/{user_id}", responses=doc(MemberOut, 400, 403, 404))
def set_member(kb_id: str, user_id: str, body: MemberRole, state: State, principal: EditUser) -> Dict[str, Any]:
    kb = kb_for(state, kb_id, principal, "owner")
    return state.store.set_member(kb.id, user_id, body.role).to_dict()


@router.delete("/{kb_id}/members/{user_id}", status_code=204, responses=doc(None, 403, 404))
def remove_member(kb_id: str, user_id: str, state: State, principal: EditUser) -> Response:
    kb = kb_for(state, kb_id, principal, "owner")
    if not state.store.remove_member(kb.id, user_id):
        raise not_found("member", user_id)
    return Response(status_code=204)


# --- documents -------------------------------------------------------------------------------------------------
@router.get("/{kb_id}/documents", responses=doc(DocumentList, 404))
def list_documents(kb_id: str, state: State, principal: ChatUser) -> Dict[str, Any]:
    kb, _ = readable_kb(state, kb_id, principal)
    return _backend(state).list(kb)


@router.put("/{kb_id}/documents/{name:path}", responses=doc(DocumentPut, 400, 403, 404, 409, 413), openapi_extra={
    "requestBody": {"required": True, "content": {"application/octet-stream": {"schema": {
        "type": "string", "format": "binary"}}}, "description": "The file's bytes (limit: max_upload_bytes)."}})
async def put_document(kb_id: str, name: str, request: Request, state: State, principal: EditUser
                       ) -> Dict[str, Any]:
    kb = await run_in_threadpool(kb_for, state, kb_id, principal, "editor")
    data = await request.body()
    return await run_in_threadpool(_backend(state).put, kb, name, data)


@router.delete("/{kb_id}/documents/{name:path}", status_code=204, responses=doc(None, 403, 404, 409))
def delete_document(kb_id: str, name: str, state: State, principal: EditUser) -> Response:
    kb = kb_for(state, kb_id, principal, "editor")
    _backend(state).remove(kb, name)
    return Response(status_code=204)
