"""API keys on requests: ``Authorization: Bearer <key>`` -> the user id every stored object is owned by.

With no active key in the store the server is open (user :data:`~..storage.conversation._sql.DEFAULT_OWNER`), which
:func:`check_bind` allows only on a loopback host. A header that is present is always checked.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Optional

from fastapi import Request

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.errors import APIError
from llama_index_convrag.storage.conversation._sql import DEFAULT_OWNER, SQLConversationStore

OPEN_USER = DEFAULT_OWNER


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, store: SQLConversationStore) -> None:
    """Refuse to serve without keys on a non-loopback host (ConfigurationError saying what to do)."""
    if not is_loopback(host) and not store.has_active_keys():
        raise ConfigurationError(
            f"refusing to serve on {host!r} without API keys: anyone who can reach it could read every conversation. "
            "Create a key first ('convrag keys create USER', same --store) or bind a loopback host (127.0.0.1)")


def bearer(request: Request) -> Optional[str]:
    """The key of the ``Authorization: Bearer`` header, None when there is no header; 401 when it is malformed."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise APIError(401, "invalid_api_key", "the Authorization header must be 'Bearer <key>'")
    return key.strip()


def resolve_user(store: SQLConversationStore, key: Optional[str]) -> str:
    """The user of ``key`` (401 when unknown or revoked); without a key: the open user, or 401 when keys exist."""
    if key is not None:
        user = store.user_for_key(key)
        if user is None:
            raise APIError(401, "invalid_api_key", "the API key is unknown or revoked")
        return user
    if store.has_active_keys():
        raise APIError(401, "missing_api_key",
                       "this server needs an API key: send 'Authorization: Bearer <key>' ('convrag keys create USER')")
    return OPEN_USER


async def current_user(request: Request) -> str:
    """FastAPI dependency: the key check is a store call (``ServeState.store_call``)."""
    state = request.app.state.serve
    return await state.store_call(resolve_user, state.store, bearer(request))


@dataclass(frozen=True)
class Caller:
    """A request's key, not yet checked: routes that start a turn resolve it in their first store call (one trip to
    the thread pool before the turn's first event instead of two)."""

    store: SQLConversationStore
    key: Optional[str]

    def user(self) -> str:
        """:func:`resolve_user` (blocking: call it inside a store call)."""
        return resolve_user(self.store, self.key)


async def caller(request: Request) -> Caller:
    """FastAPI dependency: the key as sent (401 at once when the header is malformed), checked later by the route."""
    return Caller(request.app.state.serve.store, bearer(request))
