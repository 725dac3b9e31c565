"""Typed FastAPI dependencies: the process's state, the caller (rate limited), the principal after the key check,
and scope checks. Routes declare what they need with these aliases instead of reading ``app.state``."""

from __future__ import annotations

from typing import Annotated, Callable, Coroutine, Any

from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from llama_index_convrag.serve.auth import SCHEME_DESCRIPTION, SCHEME_NAME, Caller, bearer_key, is_loopback
from llama_index_convrag.serve.errors import forbidden
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.storage.conversation.accounts import Principal


async def serve_state(request: Request) -> ServeState:
    """The state the lifespan opened (``request.state``: the lifespan's state, copied into each request). Async, as
    every dependency here: FastAPI runs a sync dependency in its thread pool, a hop that under load waits for the
    interpreter lock behind the event loop's work."""
    return request.state.serve


State = Annotated[ServeState, Depends(serve_state)]


class KeyScheme(HTTPBearer):
    """The HTTP bearer scheme (declared in the OpenAPI document; no automatic 401: an open server takes requests
    without a key) as the one dependency that reads the caller: the key as sent and the process's state, counted
    against the requests rate limit (``turn``: the turns limit too; 429 past either), checked later by the route.
    One dependency, not three (state, credentials, caller): FastAPI resolves each of a request's dependencies on its
    own, and every turn and every read pays for each."""

    def __init__(self, *, turn: bool = False) -> None:
        super().__init__(auto_error=False, scheme_name=SCHEME_NAME, description=SCHEME_DESCRIPTION)
        self.turn = turn

    async def __call__(self, request: Request) -> Caller:  # type: ignore[override]
        state: ServeState = request.state.serve
        server = request.scope.get("server")
        who = Caller(state, bearer_key(request.headers.get("authorization")),
                     is_loopback(server[0] if server else None))
        await state.rate.check(who.client, turn=self.turn)
        return who


#: the key, not yet checked (the route checks it in its first store call), counted as a request
KeyCaller = Annotated[Caller, Depends(KeyScheme())]
#: as KeyCaller, counted as a turn too (the routes that start one)
TurnCaller = Annotated[Caller, Depends(KeyScheme(turn=True))]


async def current_principal(who: KeyCaller) -> Principal:
    """The key checked (a store call): who the request acts as."""
    return await who.state.store_call(who.principal)


def require(principal: Principal, scope: str) -> Principal:
    """``principal``, or 403 ``insufficient_scope`` naming the scope needed and the key's."""
    if principal.can(scope):
        return principal
    if scope in principal.scopes:  # the admin scope on a key of a user who is no longer an admin
        raise forbidden("insufficient_scope", f"this needs an admin user; {principal.user_id!r} is not one")
    raise forbidden("insufficient_scope", f"this needs a key with the {scope!r} scope; this key's scopes are "
                                          f"{list(principal.scopes)}")


def needs(scope: str) -> Callable[..., Coroutine[Any, Any, Principal]]:
    async def dependency(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
        return require(principal, scope)

    return dependency


CurrentUser = Annotated[Principal, Depends(current_principal)]
ChatUser = Annotated[Principal, Depends(needs("chat"))]
EditUser = Annotated[Principal, Depends(needs("edit"))]
AdminUser = Annotated[Principal, Depends(needs("admin"))]

