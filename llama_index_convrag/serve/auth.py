"""API keys on requests: ``Authorization: Bearer <key>`` (the OpenAPI document declares the HTTP bearer scheme)
-> the :class:`~..storage.conversation.accounts.Principal` every stored object is owned by and checked against.

With no active key in the store the server is open: every request is user :data:`OPEN_USER`, an admin with every
scope, whatever bearer token it sends (OpenAI's client refuses an empty key; local OpenAI-compatible servers accept
any), but only on a connection that arrived on a loopback address; :func:`check_bind` refuses to start an open
server on any other host. Once a key exists, every request needs a valid one.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

from fastapi.security.utils import get_authorization_scheme_param

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.errors import APIError
from llama_index_convrag.storage.conversation._sql import DEFAULT_OWNER, SQLConversationStore
from llama_index_convrag.storage.conversation.accounts import SCOPES, Principal, hash_key

if TYPE_CHECKING:
    from llama_index_convrag.serve.state import ServeState

OPEN_USER = DEFAULT_OWNER
#: who an open server's requests act as
OPEN_PRINCIPAL = Principal(user_id=OPEN_USER, scopes=SCOPES, admin=True)
#: the security scheme's name and description in the OpenAPI document (``deps.KeyScheme``)
SCHEME_NAME = "apiKey"
SCHEME_DESCRIPTION = ("An API key from 'convrag keys create USER' (a server without keys, on a loopback address, "
                      "takes any token).")


def bearer_key(authorization: Optional[str]) -> Optional[str]:
    """The key of an ``Authorization: Bearer <key>`` header; None without one (no header, another scheme, no key)."""
    scheme, key = get_authorization_scheme_param(authorization)  # FastAPI's own parse, as HTTPBearer's
    return key if key and scheme.lower() == "bearer" else None


@lru_cache(maxsize=256)
def is_loopback(host: Optional[str]) -> bool:
    if host is None:
        return False
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


def resolve_principal(store: SQLConversationStore, key: Optional[str], loopback: bool) -> Principal:
    """Who ``key`` acts as (401 when unknown or revoked while keys exist); without keys in the store: the open
    principal on a loopback connection, 401 on any other."""
    if key is not None:
        found = store.principal_for_key(key)
        if found is not None:
            return found
    if store.has_active_keys():
        if key is None:
            raise APIError(401, "missing_api_key", "this server needs an API key: send 'Authorization: Bearer <key>' "
                                                   "('convrag keys create USER')")
        raise APIError(401, "invalid_api_key", "the API key is unknown or revoked")
    if not loopback:
        raise APIError(401, "missing_api_key", "this server has no API keys and answers only loopback connections "
                                               "without one; create a key ('convrag keys create USER')")
    return OPEN_PRINCIPAL


@dataclass(frozen=True)
class Caller:
    """A request's key, not yet checked: a route resolves it in its first store call (one trip to the thread pool
    before a turn's first event instead of two). ``state``: the process's (the routes that read the caller take it
    from here, not from a dependency of their own); ``client``: what the rate limiter counts it as."""

    state: "ServeState"
    key: Optional[str]
    loopback: bool

    @property
    def store(self) -> SQLConversationStore:
        return self.state.store

    @property
    def client(self) -> str:
        return "open" if self.key is None else hash_key(self.key)

    def principal(self) -> Principal:
        """:func:`resolve_principal` (blocking: call it inside a store call)."""
        return resolve_principal(self.store, self.key, self.loopback)
