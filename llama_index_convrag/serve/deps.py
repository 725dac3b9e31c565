"""Typed FastAPI dependencies: the process's state, the caller (rate limited), the principal after the key check,
and scope checks. Routes declare what they need with these aliases instead of reading ``app.state``."""

from __future__ import annotations

from typing import Annotated, Callable, Coroutine, Any, Optional

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials

from llama_index_convrag.serve.auth import Caller, bearer_scheme, is_loopback
from llama_index_convrag.serve.errors import forbidden
from llama_index_convrag.serve.state import ServeState
from llama_index_convrag.storage.conversation.accounts import Principal


async def serve_state(request: Request) -> ServeState:
    """The state the lifespan opened (``request.state``: the lifespan's state, copied into each request). Async, as
    every dependency here: FastAPI runs a sync dependency in its thread pool, a hop that under load waits for the
    interpreter lock behind the event loop's work."""
    return request.state.serve


State = Annotated[ServeState, Depends(serve_state)]
Credentials = Annotated[Optional[HTTPAuthorizationCredentials], Depends(bearer_scheme)]


def _caller(request: Request, state: ServeState, credentials: Optional[HTTPAuthorizationCredentials]) -> Caller:
    server = request.scope.get("server")
    return Caller(state.store, credentials.credentials if credentials is not None else None,
                  is_loopback(server[0] if server else None))


async def caller(request: Request, state: State, credentials: Credentials) -> Caller:
    """The key as sent, counted against the requests rate limit (429 past it), checked later by the route."""
    who = _caller(request, state, credentials)
    await state.rate.check(who.client)
    return who


async def turn_caller(request: Request, state: State, credentials: Credentials) -> Caller:
    """As :func:`caller`, counted against the turns rate limit too (the route starts a turn)."""
    who = _caller(request, state, credentials)
    await state.rate.check(who.client, turn=True)
    return who


async def current_principal(state: State, who: Annotated[Caller, Depends(caller)]) -> Principal:
    """The key checked (a store call): who the request acts as."""
    return await state.store_call(who.principal)


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
#: the key, not yet checked (the route checks it in its first store call), counted as a request
KeyCaller = Annotated[Caller, Depends(caller)]
#: as KeyCaller, counted as a turn too (the routes that start one)
TurnCaller = Annotated[Caller, Depends(turn_caller)]
