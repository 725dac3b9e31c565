"""A model's limits: its context window, the output limit sent with every call (``max_tokens``) and the timeout.

Each value comes from the first of: the explicit argument (a CLI option), the environment
(:data:`ENV_CONTEXT_WINDOW`, :data:`ENV_MAX_TOKENS`, :data:`ENV_TIMEOUT`), what the server reports
(:func:`probe_server`: llama.cpp's ``GET /props`` ``default_generation_settings.n_ctx``, or ``GET /v1/models``
metadata such as vLLM's ``max_model_len``), the default. :class:`ModelLimits` keeps where each value came from, so
the CLI and the turn record can say which limit was used.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple
from urllib.parse import urlsplit, urlunsplit

from llama_index_convrag.errors import ConfigurationError

ENV_CONTEXT_WINDOW = "CONVRAG_LLM_CONTEXT_WINDOW"
ENV_MAX_TOKENS = "CONVRAG_LLM_MAX_TOKENS"
ENV_TIMEOUT = "CONVRAG_LLM_TIMEOUT"

DEFAULT_CONTEXT_WINDOW = 8192
#: Output tokens per call when nothing else says: a hidden refine step cannot run on for thousands of tokens.
DEFAULT_MAX_TOKENS = 512
#: Seconds per request (non-streamed: the whole reply; streamed: between two chunks): room for a model on a CPU to
#: write DEFAULT_MAX_TOKENS tokens.
DEFAULT_TIMEOUT_S = 300.0
#: Seconds the probe of ``/v1/models`` and ``/props`` waits for each answer.
PROBE_TIMEOUT_S = 3.0
#: The smallest window accepted (the budget keeps 5% slack and the output limit out of it).
MIN_CONTEXT_WINDOW = 256

#: ``/v1/models`` entry keys that hold the served context window, by server (vLLM, LM Studio, OpenRouter, ours).
WINDOW_KEYS = ("max_model_len", "context_length", "max_context_length", "context_window", "n_ctx")
#: ``/v1/models`` entry keys that hold the output limit.
OUTPUT_KEYS = ("max_output_tokens", "max_completion_tokens")

SOURCES = ("option", "env", "server", "default")


@dataclass(frozen=True)
class ServerLimits:
    """What the server said: the window and the output limit (None: not said), and which endpoint said them."""

    context_window: Optional[int] = None
    max_tokens: Optional[int] = None
    endpoint: Optional[str] = None


@dataclass(frozen=True)
class ModelLimits:
    """The limits in use and where each came from (``option``, ``env``, ``server (GET /props)``, ``default``)."""

    context_window: int
    max_tokens: int
    timeout: float
    sources: Dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for the CLI: ``context window 4096 (server GET /props), max tokens 512 (default), ...``."""
        src = self.sources
        return (f"context window {self.context_window} ({src.get('context_window', 'default')}), "
                f"max tokens {self.max_tokens} ({src.get('max_tokens', 'default')}), "
                f"timeout {self.timeout:g} s ({src.get('timeout', 'default')})")

    def to_dict(self) -> Dict[str, Any]:
        return {"context_window": self.context_window, "max_tokens": self.max_tokens, "timeout": self.timeout,
                "sources": dict(self.sources)}


# --- parsing (pure) ------------------------------------------------------------------------------------------------
def positive_int(value: Any, what: str) -> int:
    """``value`` as an integer >= 1; ConfigurationError naming ``what`` and the value otherwise."""
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigurationError(f"{what} must be an integer >= 1, got {value!r}")
    return number


def positive_seconds(value: Any, what: str) -> float:
    """``value`` as seconds > 0; ConfigurationError naming ``what`` and the value otherwise."""
    try:
        number = float(str(value).strip())
    except ValueError:
        number = 0.0
    if not number > 0 or math.isinf(number):
        raise ConfigurationError(f"{what} must be a number of seconds > 0, got {value!r}")
    return number


def _int_or_none(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and value >= 1:
        return int(value)
    return None


def window_from_props(payload: Any) -> Optional[int]:
    """llama.cpp's ``GET /props``: ``default_generation_settings.n_ctx`` (older builds: a top-level ``n_ctx``)."""
    if not isinstance(payload, dict):
        return None
    settings = payload.get("default_generation_settings")
    if isinstance(settings, dict) and _int_or_none(settings.get("n_ctx")) is not None:
        return _int_or_none(settings.get("n_ctx"))
    return _int_or_none(payload.get("n_ctx"))


def limits_from_models(payload: Any, model: Optional[str]) -> Tuple[Optional[int], Optional[int]]:
    """``(window, output limit)`` of ``model``'s entry in ``GET /v1/models`` (the only entry when one is served),
    read from :data:`WINDOW_KEYS` / :data:`OUTPUT_KEYS` at the entry or in its ``meta``; None where not said.
    ``n_ctx_train`` (the trained window) is not read: a server may serve less of it."""
    entries = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(entries, list):
        return None, None
    entries = [e for e in entries if isinstance(e, dict)]
    chosen = [e for e in entries if model is not None and e.get("id") == model]
    if not chosen and len(entries) == 1:
        chosen = entries
    if not chosen:
        return None, None
    entry = chosen[0]
    places = [entry] + [entry[k] for k in ("meta", "metadata") if isinstance(entry.get(k), dict)]
    window = next((_int_or_none(p.get(k)) for p in places for k in WINDOW_KEYS if _int_or_none(p.get(k))), None)
    output = next((_int_or_none(p.get(k)) for p in places for k in OUTPUT_KEYS if _int_or_none(p.get(k))), None)
    return window, output


def server_root(base_url: str) -> str:
    """``http://host:port/v1`` -> ``http://host:port`` (llama.cpp serves ``/props`` at the root)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


# --- the probe (I/O) ------------------------------------------------------------------------------------------------
def request_json(url: str, api_key: Optional[str], timeout: float, body: Optional[Dict[str, Any]] = None) -> Any:
    """GET ``url`` (POST ``body`` when given); the JSON reply, or None on any failure."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310 - the user's own server URL
            return json.loads(reply.read().decode("utf-8", errors="replace"))
    except (OSError, ValueError, urllib.error.URLError):
        return None


def probe_server(base_url: str, model: Optional[str] = None, *, api_key: Optional[str] = None,
                 timeout: float = PROBE_TIMEOUT_S) -> ServerLimits:
    """Ask an OpenAI-compatible server for its limits: ``GET /props`` (llama.cpp), then ``GET /v1/models``. A server
    that says nothing (or is not there) gives an empty :class:`ServerLimits`; this never raises."""
    window = window_from_props(request_json(server_root(base_url) + "/props", api_key, timeout))
    if window is not None:
        return ServerLimits(context_window=window, endpoint="GET /props")
    window, output = limits_from_models(request_json(base_url.rstrip("/") + "/models", api_key, timeout), model)
    if window is None and output is None:
        return ServerLimits()
    return ServerLimits(context_window=window, max_tokens=output, endpoint="GET /v1/models")


# --- the server's own tokenizer ---------------------------------------------------------------------------------------
#: Token-count endpoints, tried in order: ``(path at the server root, request body for TEXT, reply key)``. llama.cpp
#: answers ``{"tokens": [...]}``, llama-cpp-python ``{"count": n}``, vLLM ``{"count": n, "tokens": [...]}``.
TOKENIZE_ENDPOINTS = (("/tokenize", "llama.cpp"), ("/extras/tokenize/count", "llama-cpp-python"),
                      ("/tokenize", "vllm"))


def tokenize_body(kind: str, text: str, model: Optional[str]) -> Dict[str, Any]:
    """The request body of one token count on a ``kind`` server (:data:`TOKENIZE_ENDPOINTS`)."""
    if kind == "llama.cpp":
        return {"content": text, "add_special": False}
    if kind == "llama-cpp-python":
        return {"input": text}
    return {"model": model, "prompt": text, "add_special_tokens": False}


def token_count(reply: Any) -> Optional[int]:
    """The count in a tokenize reply (``count``, else the length of ``tokens``), or None."""
    if not isinstance(reply, dict):
        return None
    count = reply.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    tokens = reply.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


def probe_tokenizer(base_url: str, model: Optional[str] = None, *, api_key: Optional[str] = None,
                    timeout: float = PROBE_TIMEOUT_S) -> Optional[Tuple[str, str]]:
    """``(url, kind)`` of the server's token-count endpoint (:data:`TOKENIZE_ENDPOINTS`), or None when it has none.
    Counting with the served model's own tokenizer keeps a budget exact where tiktoken undercounts (digits, other
    vocabularies)."""
    root = server_root(base_url)
    for path, kind in TOKENIZE_ENDPOINTS:
        reply = request_json(root + path, api_key, timeout, tokenize_body(kind, "hello world", model))
        if token_count(reply) is not None and token_count(reply) > 0:
            return root + path, kind
    return None


# --- the rule ----------------------------------------------------------------------------------------------------
def _first(explicit: Any, env: Mapping[str, str], name: str, server: Any, endpoint: Optional[str],
           default: Any) -> Tuple[Any, str]:
    if explicit is not None:
        return explicit, "option"
    raw = env.get(name)
    if raw is not None and raw.strip():
        return raw, f"env {name}"
    if server is not None:
        return server, f"server {endpoint}"
    return default, "default"


def resolve_limits(*, context_window: Optional[int] = None, max_tokens: Optional[int] = None,
                   timeout: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
                   server: Optional[ServerLimits] = None,
                   default_context_window: int = DEFAULT_CONTEXT_WINDOW) -> ModelLimits:
    """Explicit > environment > server-reported > default, for each limit; validated, naming the bad value and
    where it came from. Without a stated output limit, :data:`DEFAULT_MAX_TOKENS` capped at a quarter of the
    window."""
    env = {} if env is None else env
    srv = server if server is not None else ServerLimits()
    raw_window, window_src = _first(context_window, env, ENV_CONTEXT_WINDOW, srv.context_window, srv.endpoint,
                                    default_context_window)
    window = positive_int(raw_window, f"the context window ({window_src})")
    if window < MIN_CONTEXT_WINDOW:
        raise ConfigurationError(f"the context window ({window_src}) must be >= {MIN_CONTEXT_WINDOW} tokens, "
                                 f"got {window}")
    raw_output, output_src = _first(max_tokens, env, ENV_MAX_TOKENS, srv.max_tokens, srv.endpoint, None)
    if raw_output is None:
        output = min(DEFAULT_MAX_TOKENS, window // 4)
    else:
        output = positive_int(raw_output, f"max tokens ({output_src})")
    if output >= window:
        raise ConfigurationError(f"max tokens {output} ({output_src}) must be below the context window {window} "
                                 f"({window_src}): the prompt needs room too")
    raw_timeout, timeout_src = _first(timeout, env, ENV_TIMEOUT, None, None, DEFAULT_TIMEOUT_S)
    seconds = positive_seconds(raw_timeout, f"the LLM timeout ({timeout_src})")
    return ModelLimits(context_window=window, max_tokens=output, timeout=seconds,
                       sources={"context_window": window_src, "max_tokens": output_src, "timeout": timeout_src})


def needs_probe(context_window: Optional[int], max_tokens: Optional[int], env: Mapping[str, str]) -> bool:
    """True when the window or the output limit is left to the server (neither given nor in the environment)."""
    return ((context_window is None and not (env.get(ENV_CONTEXT_WINDOW) or "").strip())
            or (max_tokens is None and not (env.get(ENV_MAX_TOKENS) or "").strip()))


__all__ = ["TOKENIZE_ENDPOINTS", "probe_tokenizer", "request_json", "token_count", "tokenize_body", "DEFAULT_CONTEXT_WINDOW", "DEFAULT_MAX_TOKENS", "DEFAULT_TIMEOUT_S", "ENV_CONTEXT_WINDOW", "ENV_MAX_TOKENS",
           "ENV_TIMEOUT", "ModelLimits", "ServerLimits", "limits_from_models", "needs_probe", "probe_server",
           "resolve_limits", "server_root", "window_from_props"]
