"""Where the vectors live and how to reach them: :class:`MilvusTarget`, its resolution from arguments and
environment, and cached Milvus clients (Milvus Lite file or server URI) with errors that name the URI."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

from pymilvus import AsyncMilvusClient, MilvusClient

from llama_index_convrag._env import pick
from llama_index_convrag.milvus.pkg_resources_shim import ensure_pkg_resources
from llama_index_convrag.errors import ConfigurationError, MilvusConnectionError
from llama_index_convrag.milvus.lite_lock import (  # noqa: F401 - re-exported: the callers of milvus.client
    LiteFileBusyError, acquire_lite_lock, busy_message, describe_process, lite_lock_path, lite_own_lock_holder,
    release_lite_lock)

ensure_pkg_resources()  # before milvus-lite 2.5.1 is imported (pymilvus imports it on the first Lite connection)

ENV_MILVUS_URI = "CONVRAG_MILVUS_URI"
ENV_MILVUS_TOKEN = "CONVRAG_MILVUS_TOKEN"


@dataclass(frozen=True)
class MilvusTarget:
    """Where the vectors live: a Milvus Lite file or a Milvus server URI."""

    uri: str
    token: Optional[str] = None

    @property
    def is_lite(self) -> bool:
        return not self.uri.startswith(("http://", "https://", "tcp://", "unix:"))


def default_milvus_uri() -> str:
    """``./convrag.db`` in the working directory: visible, per project, and easy to delete."""
    return str(Path.cwd() / "convrag.db")


COLLECTION_NAME_RULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_COLLECTION_NAME = 255
#: The URI forms Milvus clients accept (pymilvus treats anything not ending in .db as a server address).
URI_FORMS = ("a Milvus Lite file path ending in .db (e.g. ./convrag.db)", "http://HOST:PORT or https://HOST:PORT",
             "tcp://HOST:PORT", "unix:/path/to/milvus.sock")


def suggest_collection_name(name: str) -> str:
    """A valid collection name close to ``name``: accents dropped, other characters to ``_``, a letter first."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    clean = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", ascii_name)).strip("_")
    if not clean:
        return "convrag"
    if clean[0].isdigit():
        clean = f"c_{clean}"
    return clean[:MAX_COLLECTION_NAME]


def validate_collection_name(name: str) -> str:
    """``name`` when Milvus accepts it (an ASCII letter or ``_`` first, then ASCII letters, digits, ``_``; at most
    255 characters, measured on Milvus Lite 2.5.1); :class:`ConfigurationError` with a valid suggestion otherwise."""
    if len(name) <= MAX_COLLECTION_NAME and COLLECTION_NAME_RULE.fullmatch(name):
        return name
    if not name:
        why = "is empty"
    elif len(name) > MAX_COLLECTION_NAME:
        why = f"is {len(name)} characters long (at most {MAX_COLLECTION_NAME})"
    elif not re.match(r"[A-Za-z_]", name):
        why = "must start with an ASCII letter or an underscore"
    else:
        bad = sorted({ch for ch in name if not re.match(r"[A-Za-z0-9_]", ch)})
        why = f"may only hold ASCII letters, digits and underscores (found {''.join(bad)!r})"
    shown = f"{name[:60]!r}{'...' if len(name) > 60 else ''}"
    raise ConfigurationError(f"collection name {shown} {why}; try {suggest_collection_name(name)!r}")


def validate_uri(uri: str) -> str:
    """``uri`` when it has a form Milvus clients accept (:data:`URI_FORMS`); :class:`ConfigurationError` naming
    them otherwise. No I/O."""
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", uri)
    if scheme is not None and len(scheme.group(1)) > 1:  # "C:" is a Windows drive, not a scheme
        name = scheme.group(1).lower()
        if name == "unix" or (name in ("http", "https", "tcp") and re.match(r"[A-Za-z]+://[^/\s]+", uri)):
            return uri
        why = "has no host" if name in ("http", "https", "tcp") else f"scheme {name!r} is not one Milvus speaks"
    elif not uri.strip():
        why = "is empty"
    elif not uri.endswith(".db"):
        why = "is a file path not ending in .db (Milvus Lite files must)"
    else:
        return uri
    raise ConfigurationError(f"Milvus URI {uri!r} {why}; accepted: {'; '.join(URI_FORMS)}")


def resolve_milvus(
    uri: Optional[str] = None, token: Optional[str] = None, env: Optional[Mapping[str, str]] = None
) -> MilvusTarget:
    """Milvus URI and token from arguments, then ``CONVRAG_MILVUS_URI``/``_TOKEN``, then ``./convrag.db``."""
    env = os.environ if env is None else env
    resolved = pick(uri, env, ENV_MILVUS_URI)
    if resolved is None:
        resolved = default_milvus_uri()
    validate_uri(resolved)
    return MilvusTarget(uri=resolved, token=pick(token, env, ENV_MILVUS_TOKEN))


_LOCK = threading.Lock()
_CLIENTS: Dict[Tuple[str, Optional[str]], MilvusClient] = {}


#: gRPC options for Milvus Lite's local socket: pymilvus pings every 10 s even with no call in flight, which the
#: embedded server answers with GOAWAY "too_many_pings" after a few idle pings, failing the next RPC.
LITE_GRPC_OPTIONS: Dict[str, object] = {
    "grpc.keepalive_permit_without_calls": False,
    "grpc.keepalive_time_ms": 120_000,
}


def client_kwargs(target: MilvusTarget, timeout: float) -> Dict[str, object]:
    """Keyword arguments for ``MilvusClient``/``AsyncMilvusClient`` for ``target``."""
    kwargs: Dict[str, object] = {"uri": target.uri, "timeout": timeout}
    if target.token is not None:
        kwargs["token"] = target.token
    if target.is_lite:
        kwargs["grpc_options"] = dict(LITE_GRPC_OPTIONS)
    return kwargs


def _check_lite_path(uri: str) -> None:
    parent = Path(uri).expanduser().resolve().parent
    if not parent.is_dir():
        raise MilvusConnectionError(
            f"cannot open Milvus Lite file {uri!r}: folder {str(parent)!r} does not exist"
        )


def server_log_path(target: MilvusTarget) -> Path:
    """Where the embedded Milvus Lite server of ``target`` writes its own log lines (``<file>.server.log``)."""
    return Path(target.uri).expanduser().with_name(Path(target.uri).name + ".server.log")


@contextlib.contextmanager
def _stderr_redirected(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` while a child process is spawned (it keeps the file as its stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def stop_lite_server(uri: str) -> None:
    """Stop this process' embedded Milvus Lite server of ``uri`` (closing its clients leaves it running, and a new
    client of the same path would reuse it, even after the file was removed)."""
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:  # pragma: no cover - no Lite, no server
        return
    path = str(Path(uri).expanduser().absolute().resolve())
    if path in server_manager_instance._servers:  # release_server() logs a warning for a path it does not hold
        server_manager_instance.release_server(path)


#: The first bytes of every Milvus Lite file (Milvus Lite keeps its data in an SQLite database).
SQLITE_HEADER = b"SQLite format 3\x00"


def check_lite_file(uri: str) -> None:
    """:class:`MilvusConnectionError` naming the cause when ``uri`` exists but cannot be a Milvus Lite database (a
    folder, unreadable, or not an SQLite file), before a Lite server is started on it. A missing or empty file is
    fine: Milvus Lite creates it."""
    path = Path(uri).expanduser()
    if path.is_dir():
        raise MilvusConnectionError(f"cannot open Milvus Lite file {uri!r}: it is a folder")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise MilvusConnectionError(f"cannot open Milvus Lite file {uri!r}: {exc.strerror}") from exc
    if head and head != SQLITE_HEADER:
        raise MilvusConnectionError(
            f"{uri!r} is not a Milvus Lite database (those are SQLite files; this one starts with {head[:8]!r}): it "
            f"is damaged or another kind of file; move it away and ingest again, or pass another --uri")


def lite_server_errors(target: MilvusTarget, since: int = 0) -> List[str]:
    """Error lines the embedded Milvus Lite server wrote to its log after byte ``since`` (its own words, e.g.
    ``Create table failed, errs: file is not a database``), without their timestamp prefix; newest last."""
    try:
        with open(server_log_path(target), "rb") as f:
            f.seek(since)
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        if line.startswith("E") and "]" in line:
            msg = line.rsplit("]", 1)[-1].strip()
            if msg and msg not in out:
                out.append(msg)
    return out


def connect_milvus(target: MilvusTarget, *, timeout: float = 10.0) -> MilvusClient:
    """A client for ``target``; one per (uri, token) per process (Milvus Lite allows one server per file).

    For a Milvus Lite file the embedded server's own log goes to :func:`server_log_path`, not to stderr.
    """
    key = (target.uri, target.token)
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is not None:
            return client
        log_start = 0
        if target.is_lite:
            _check_lite_path(target.uri)
            check_lite_file(target.uri)
            acquire_lite_lock(target.uri)
            log = server_log_path(target)
            log_start = log.stat().st_size if log.is_file() else 0
        try:
            if target.is_lite:
                # the embedded server logs every BM25 index commit to stderr: keep that out of the user's terminal
                with _stderr_redirected(server_log_path(target)):
                    client = MilvusClient(**client_kwargs(target, timeout))
            else:
                client = MilvusClient(**client_kwargs(target, timeout))
        except Exception as exc:  # pymilvus raises several unrelated types here
            said = lite_server_errors(target, log_start) if target.is_lite else []
            why = f"; Milvus Lite says: {said[0]}" if said else ""
            raise MilvusConnectionError(f"cannot connect to Milvus at {target.uri!r}: {exc}{why}") from exc
        _CLIENTS[key] = client
        return client


def connect_milvus_async(target: MilvusTarget, *, timeout: float = 10.0) -> AsyncMilvusClient:
    """A new async client (works for Milvus Lite files too with pymilvus 2.6); bind it to one event loop."""
    if target.is_lite:
        _check_lite_path(target.uri)
    try:
        return AsyncMilvusClient(**client_kwargs(target, timeout))
    except Exception as exc:
        raise MilvusConnectionError(f"cannot connect to Milvus at {target.uri!r}: {exc}") from exc


def forget_client(target: MilvusTarget) -> None:
    """Close and drop the cached client of ``target`` (others stay open)."""
    with _LOCK:
        client = _CLIENTS.pop((target.uri, target.token), None)
    if client is not None:
        try:
            client.close()
        except Exception:
            pass


def reconnect_milvus(target: MilvusTarget, *, timeout: float = 10.0) -> MilvusClient:
    """Replace the cached client of the server ``target`` with one on a new gRPC channel (pymilvus shares one
    channel per URI among its clients, so closing a client and connecting again would reuse a stuck channel)."""
    if target.is_lite:
        raise ConfigurationError(f"reconnect_milvus needs a Milvus server URI (http://HOST:PORT), got the Milvus "
                                 f"Lite file {target.uri!r}")
    key = (target.uri, target.token)
    with _LOCK:
        old = _CLIENTS.pop(key, None)
        try:
            client = MilvusClient(**client_kwargs(target, timeout), dedicated=True)
        except Exception as exc:  # pymilvus raises several unrelated types here
            raise MilvusConnectionError(f"cannot connect to Milvus at {target.uri!r}: {exc}") from exc
        _CLIENTS[key] = client
    if old is not None:
        try:
            old.close()
        except Exception:  # noqa: BLE001 - the old channel may be the broken one
            pass
    return client


def forget_clients() -> None:
    """Close and drop every cached client (tests, long-running notebooks)."""
    with _LOCK:
        for client in _CLIENTS.values():
            try:
                client.close()
            except Exception:
                pass
        _CLIENTS.clear()
