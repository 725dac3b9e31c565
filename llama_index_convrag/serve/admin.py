"""``/v1/admin``: users and their keys, for an admin user's key with the ``admin`` scope (else 403
``insufficient_scope``). The same as ``convrag users`` / ``convrag keys`` on the command line."""

from __future__ import annotations

from typing import Any, Dict, Optional

from fastapi import APIRouter, Query, Response

from llama_index_convrag.serve.deps import AdminUser, State
from llama_index_convrag.serve.errors import not_found
from llama_index_convrag.serve.models import KeyCreated, KeyList, NewKey, UserList, UserOut, UserRole, doc

router = APIRouter(prefix="/v1/admin", tags=["admin"])


@router.get("/users", responses=doc(UserList, 403))
def list_users(state: State, admin: AdminUser) -> Dict[str, Any]:
    return {"data": [u.to_dict() for u in state.store.list_users()]}


@router.put("/users/{user_id}", responses=doc(UserOut, 400, 403))
def set_user_role(user_id: str, body: UserRole, state: State, admin: AdminUser) -> Dict[str, Any]:
    return state.store.ensure_user(user_id, role=body.role).to_dict()


@router.get("/keys", responses=doc(KeyList, 403))
def list_keys(state: State, admin: AdminUser,
              user_id: Optional[str] = Query(default=None, max_length=128)) -> Dict[str, Any]:
    return {"data": [k.to_dict() for k in state.store.list_keys(user_id)]}


@router.post("/keys", status_code=201, responses=doc(KeyCreated, 400, 403))
def create_key(body: NewKey, state: State, admin: AdminUser) -> Dict[str, Any]:
    key, secret = state.store.create_key(body.user_id, body.scopes)
    return {**key.to_dict(), "key": secret}


@router.delete("/keys/{key_id}", status_code=204, responses=doc(None, 403, 404))
def revoke_key(key_id: str, state: State, admin: AdminUser) -> Response:
    if not state.store.revoke_key(key_id):
        raise not_found("active key", key_id)
    return Response(status_code=204)
