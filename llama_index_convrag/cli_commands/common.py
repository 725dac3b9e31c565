"""Shared CLI plumbing: exit codes, :class:`CLIError`, Milvus / model / LLM resolution, the dimension check."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence, TextIO

from llama_index_convrag._limits import MAX_QUESTION_CHARS

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_MILVUS = 4
EXIT_LLM = 5
EXIT_DIMENSION = 6
EXIT_TOO_LARGE = 7
EXIT_BUSY = 8
EXIT_NO_SPACE = 9
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """exit codes:
  0  ok
  1  unexpected error (one line on stderr; --debug for the traceback)
  2  usage error (bad option or value, or an option that needs an LLM without one)
  3  input not found, empty folder, no supported files, missing collection, unknown conversation, or some
     files failed to ingest (listed; the others are stored)
  4  Milvus unreachable or unusable URI
  5  LLM configuration problem (--model without OPENAI_API_KEY/--base-url, or the server refused)
  6  collection built with a different embedding dimension than the model's
  7  question longer than the limit (""" + f"{MAX_QUESTION_CHARS:,}" + """ characters; also convrag serve's default)
  8  the Milvus Lite file is in use by another process (its pid named)
  9  no space left (or too little) on the disk holding the Milvus Lite file
  130 interrupted (Ctrl-C); an interrupted ingest keeps what it stored, re-run to resume"""

MILVUS_CONNECT_TIMEOUT_S = 5.0
#: Milvus Lite starts its embedded server first, which takes longer than 5 s on a busy machine.
LITE_START_TIMEOUT_S = 60.0
STORE_FILE = "convrag_chats.db"


class CLIError(Exception):
    """An error with a known exit code; the message is printed as one line on stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_question(text: str, what: str = "question") -> str:
    """``text`` stripped; exit 2 when blank, exit 7 when longer than :data:`MAX_QUESTION_CHARS`."""
    stripped = text.strip()
    if not stripped:
        raise CLIError(EXIT_USAGE, f"the {what} is blank; type a question")
    if len(stripped) > MAX_QUESTION_CHARS:
        raise CLIError(EXIT_TOO_LARGE, f"the {what} is {len(stripped):,} characters; the limit is "
                                       f"{MAX_QUESTION_CHARS:,} (put long text in a file and ingest it)")
    return stripped


class Output:
    """Where results go: human text or JSON on stdout, progress and notes on stderr."""

    def __init__(self, *, json_mode: bool = False, quiet: bool = False, stdout: Optional[TextIO] = None,
                 stderr: Optional[TextIO] = None) -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr

    @property
    def progress(self) -> bool:
        """Progress bars only for a person watching: not with --quiet / --json, and only on a terminal."""
        return not (self.quiet or self.json_mode) and self.stderr.isatty()

    def text(self, line: str = "", *, end: str = "\n") -> None:
        if not self.json_mode:
            self.stdout.write(line + end)
            self.stdout.flush()

    def note(self, line: str) -> None:
        """Informational lines (stderr); silenced by --quiet and --json."""
        if not (self.quiet or self.json_mode):
            self.stderr.write(line + "\n")

    def error(self, code: int, message: str, kind: str) -> None:
        """An error: one line on stderr, and under ``--json`` also a JSON object on stdout."""
        if self.json_mode:
            self.json({"error": {"exit_code": code, "type": kind, "message": message}})
        self.stderr.write(f"convrag: error: {message}\n")

    def json(self, payload: Any) -> None:
        self.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")
        self.stdout.flush()


def check_collection_name(name: str) -> str:
    """``name`` when Milvus accepts it; exit 2 with a suggested valid name otherwise. No I/O."""
    from llama_index_convrag.milvus.client import suggest_collection_name, validate_collection_name

    try:
        return validate_collection_name(name)
    except ValueError as exc:
        raise CLIError(EXIT_USAGE, str(exc).rsplit("; try ", 1)[0] + f"; try --collection "
                                                                    f"{suggest_collection_name(name)}") from exc


def check_uri(uri: str) -> str:
    """``uri`` when it has a form Milvus clients accept; exit 2 naming the accepted forms otherwise. No I/O."""
    from llama_index_convrag.milvus.client import validate_uri

    try:
        return validate_uri(uri)
    except ValueError as exc:
        raise CLIError(EXIT_USAGE, str(exc)) from exc


def _connect_with_retry(target: Any, timeout: float) -> Any:
    """Milvus Lite's embedded server sometimes fails to start on a busy machine: two more tries for a Lite file."""
    from llama_index_convrag.milvus.client import LiteFileBusyError, MilvusConnectionError, connect_milvus

    for attempt in range(3 if target.is_lite else 1):
        try:
            return connect_milvus(target, timeout=timeout)
        except MilvusConnectionError as exc:
            if attempt == (2 if target.is_lite else 0) or isinstance(exc, LiteFileBusyError):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


#: Lite files this process created (uri -> target): removed again when the run fails (:func:`discard_created`).
_CREATED: Dict[str, Any] = {}


def resolve_target(uri: Optional[str]) -> Any:
    """The :class:`~llama_index_convrag.milvus.client.MilvusTarget` of ``--uri`` (validated, no I/O); exit 2 when bad."""
    from llama_index_convrag.milvus.client import resolve_milvus

    try:
        return resolve_milvus(uri)  # validates the URI's form, also when it came from CONVRAG_MILVUS_URI
    except ValueError as exc:
        raise CLIError(EXIT_USAGE, str(exc)) from exc


def connect(uri: Optional[str], *, create: bool = True) -> Any:
    """``(target, client)`` for ``--uri`` (or ``CONVRAG_MILVUS_URI`` / ``./convrag.db``); exit 4 when unusable.

    A Milvus Lite file that does not exist yet is created only with ``create`` (else exit 3, nothing created); one
    this run created is removed again when connecting fails or :func:`discard_created` is called."""
    from llama_index_convrag.milvus.client import LiteFileBusyError, MilvusConnectionError

    target = resolve_target(uri)
    _CREATED.clear()  # a new command (main() may run several in one process): earlier files are not this run's
    if target.is_lite and not Path(target.uri).expanduser().exists():
        if not create:
            raise CLIError(EXIT_INPUT, f"no Milvus Lite file at {target.uri!r}; run 'convrag ingest PATH --uri "
                                       f"{target.uri}' first")
        if Path(target.uri).expanduser().parent.is_dir():
            _CREATED[target.uri] = target
    try:
        timeout = LITE_START_TIMEOUT_S if target.is_lite else MILVUS_CONNECT_TIMEOUT_S
        client = _connect_with_retry(target, timeout)  # Lite's own log: <file>.server.log
        client.list_collections()
    except LiteFileBusyError as exc:
        _CREATED.pop(target.uri, None)  # the other process' file
        raise CLIError(EXIT_BUSY, str(exc)) from exc
    except MilvusConnectionError as exc:
        discard_created()
        raise no_space_error(target, exc) or CLIError(EXIT_MILVUS, str(exc)) from exc
    except Exception as exc:  # a client that opened but cannot be used
        discard_created()
        raise CLIError(EXIT_MILVUS, f"Milvus at {target.uri!r} is not usable: {type(exc).__name__}: {exc}") from exc
    return target, client


def discard_created() -> None:
    """After a failed run: stop the Lite servers and remove the Lite files this process created, with their lock
    and server log, so that a failed run leaves nothing behind. Files that existed before are never touched."""
    from llama_index_convrag.milvus.client import (forget_client, lite_lock_path, release_lite_lock, server_log_path,
                                                   stop_lite_server)

    for uri, target in list(_CREATED.items()):
        forget_client(target)
        stop_lite_server(uri)
        release_lite_lock(uri)
        db = Path(uri).expanduser()
        for path in (db, lite_lock_path(uri), server_log_path(target), db.with_name(f".{db.name}.lock")):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        del _CREATED[uri]


def keep_created() -> None:
    """The run stored something: the Lite files it created are the user's now."""
    _CREATED.clear()


#: Free space asked of the Lite file's disk before an ingest: this many bytes per byte of input, plus
#: :data:`MIN_FREE_BYTES` (Milvus Lite holds a chunk's text, its vector, its BM25 terms and their indexes).
SPACE_PER_INPUT_BYTE = 8
#: Free space below which an ingest does not start, and below which a failed write is taken for a full disk.
MIN_FREE_BYTES = 16 << 20
#: Words of a full disk in the errors of the OS, SQLite and Milvus Lite.
NO_SPACE_WORDS = ("no space left", "disk is full", "disk full", "not enough space")


def _free_bytes(folder: Path) -> Optional[int]:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _mb(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MB"


def check_free_space(target: Any, files: Sequence[Path]) -> None:
    """Exit 9 before anything is opened when the disk of a Milvus Lite file has less free space than an ingest of
    ``files`` needs (:data:`SPACE_PER_INPUT_BYTE` per input byte plus :data:`MIN_FREE_BYTES`)."""
    if not target.is_lite:
        return
    folder = Path(target.uri).expanduser().resolve().parent
    free = _free_bytes(folder)
    if free is None:
        return
    size = sum(f.stat().st_size for f in files if f.is_file())
    need = SPACE_PER_INPUT_BYTE * size + MIN_FREE_BYTES
    if free < need:
        raise CLIError(EXIT_NO_SPACE, f"not enough free space for the Milvus Lite file {target.uri!r}: {_mb(free)} "
                                      f"free on the disk of {str(folder)!r}, an ingest of {_mb(size)} of files "
                                      f"needs about {_mb(need)}; free some space or pass another --uri")


#: Seconds between two looks at the free space of the Lite file's disk during an ingest.
SPACE_POLL_S = 1.0


@contextlib.contextmanager
def space_watch(target: Any, stream: TextIO, min_free: int = MIN_FREE_BYTES,
                every: float = SPACE_POLL_S) -> Iterator[None]:
    """While the body runs, look at the free space of a Lite file's disk every ``every`` seconds and say at once
    (one line on ``stream``) when it drops below ``min_free``: Milvus Lite retries a failed write for minutes
    before it reports an error."""
    import threading

    if not target.is_lite:
        yield
        return
    folder = Path(target.uri).expanduser().resolve().parent
    done = threading.Event()

    def watch() -> None:
        while not done.wait(every):
            free = _free_bytes(folder)
            if free is not None and free < min_free:
                stream.write(f"convrag: warning: the disk holding the Milvus Lite file {target.uri!r} is full "
                             f"({_mb(free)} free in {str(folder)!r}); the ingest cannot store more and stops with "
                             f"exit 9 when Milvus Lite gives up (free some space and run the same command again)\n")
                stream.flush()
                return

    watcher = threading.Thread(target=watch, name="convrag-space-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def no_space_error(target: Any, exc: BaseException) -> Optional[CLIError]:
    """Exit 9 naming the path when ``exc`` comes from a full disk (ENOSPC, "No space left on device", SQLite's
    "database or disk is full", or less than :data:`MIN_FREE_BYTES` left on the Lite file's disk), else None."""
    if not target.is_lite:
        return None
    import errno

    folder = Path(target.uri).expanduser().resolve().parent
    seen: Optional[BaseException] = exc
    full = False
    for _ in range(6):
        if seen is None:
            break
        text = str(seen).lower()
        full = full or getattr(seen, "errno", None) == errno.ENOSPC or any(w in text for w in NO_SPACE_WORDS)
        seen = seen.__cause__ or seen.__context__
    free = _free_bytes(folder)
    if not full and (free is None or free >= MIN_FREE_BYTES):
        return None
    left = f"{_mb(free)} free" if free is not None else "free space unknown"
    return CLIError(EXIT_NO_SPACE, f"the disk holding the Milvus Lite file {target.uri!r} is full ({left} in "
                                   f"{str(folder)!r}); free some space or pass another --uri, then run the same "
                                   f"command again (stored files are skipped)")


def embed_model() -> Any:
    """The embedding model (``CONVRAG_EMBED_MODEL`` or the local MiniLM); bad spec -> exit 2.

    Cached per spec for the process: ``main()`` called repeatedly (tests, a notebook) loads the model once."""
    from llama_index_convrag.config.embedding import ENV_EMBED_MODEL

    try:
        return _cached_embed_model(os.environ.get(ENV_EMBED_MODEL) or None)
    except ValueError as exc:
        raise CLIError(EXIT_USAGE, str(exc)) from exc


@functools.lru_cache(maxsize=4)
def _cached_embed_model(spec: Optional[str]) -> Any:
    from llama_index_convrag.config.embedding import resolve_embed_model

    return resolve_embed_model(spec=spec)


def model_dimension(model: Any) -> int:
    dim = getattr(model, "dimension", None)
    if isinstance(dim, int):
        return dim
    return len(model.get_text_embedding("dimension probe"))


def check_dimension(client: Any, collection: str, model: Any) -> None:
    """Exit 6 when ``collection`` exists with a dense dimension different from the model's."""
    from llama_index_convrag.milvus.schema import detect_spec

    if not client.has_collection(collection):
        return
    try:
        spec = detect_spec(client, collection)
    except ValueError as exc:
        raise CLIError(EXIT_INPUT, f"collection {collection!r} cannot be used: {exc}") from exc
    dims = [spec.vector(f).dim for f in spec.dense_fields]
    want = model_dimension(model)
    if dims and dims[0] != want:
        name = getattr(model, "model_name", type(model).__name__)
        raise CLIError(EXIT_DIMENSION,
                       f"collection {collection!r} holds {dims[0]}-d vectors but the embedding model {name!r} "
                       f"makes {want}-d ones; pick another --collection or re-ingest into a new one")


def require_collection(client: Any, collection: str) -> None:
    """Exit 3 when ``collection`` is missing (a Lite file this run created is removed again)."""
    if not client.has_collection(collection):
        discard_created()
        raise CLIError(EXIT_INPUT, f"collection {collection!r} does not exist; run 'convrag ingest PATH "
                                   f"--collection {collection}' first or pass PATH")


def resolve_llm(base_url: Optional[str], model: Optional[str], gguf: Optional[str] = None, **limits: Any) -> Any:
    """The LLM from --gguf, --base-url/--model and the environment, or None (retrieval-only); exit 5 when
    inconsistent. ``limits``: ``context_window`` / ``max_tokens`` / ``timeout`` given on the command line (exit 2
    for a bad value, here or in the environment)."""
    from llama_index_convrag.config.llm import ENV_API_KEY, ENV_BASE_URL, resolve_llm as _resolve
    from llama_index_convrag.errors import ConfigurationError

    if gguf is not None:
        return gguf_llm(gguf, base_url, model, **limits)
    has_key = bool(os.environ.get(ENV_API_KEY))
    has_url = base_url is not None or bool(os.environ.get(ENV_BASE_URL))
    if model is not None and not (has_key or has_url):
        raise CLIError(EXIT_LLM, f"--model {model!r} needs an LLM endpoint: set {ENV_API_KEY} (OpenAI) or "
                                 f"{ENV_BASE_URL} / --base-url (OpenAI-compatible server)")
    url = base_url if base_url is not None else os.environ.get(ENV_BASE_URL)
    if url:  # before the client asks the server for its limits
        check_reachable(url)
    try:
        return _resolve(base_url=base_url, model=model, **limits)
    except ConfigurationError as exc:  # a limit out of range (option or environment)
        raise CLIError(EXIT_USAGE, str(exc)) from exc
    except Exception as exc:  # LlamaIndex's OpenAI validates model names and keys
        raise CLIError(EXIT_LLM, f"cannot configure the LLM: {exc}") from exc


#: The window ``--gguf`` serves when none is set (llama.cpp's ``n_ctx``).
GGUF_CONTEXT_WINDOW = 4096
#: Seconds to wait for the LLM server's TCP handshake before the first turn.
LLM_PROBE_TIMEOUT_S = 3.0


def check_reachable(url: str, timeout: float = LLM_PROBE_TIMEOUT_S) -> None:
    """Exit 5 at once when nothing listens at ``url``'s host and port (instead of the client's retries).

    Only the TCP connection is tried: a server that accepts it but fails later is handled per turn."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.hostname is None:
        raise CLIError(EXIT_LLM, f"LLM base URL {url!r} has no host; expected http(s)://HOST:PORT/v1")
    port = parts.port if parts.port is not None else (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return
    except OSError as exc:
        reason = "connection refused (is the server running?)" if isinstance(exc, ConnectionRefusedError) \
            else f"{type(exc).__name__}: {exc}"
        raise CLIError(EXIT_LLM, f"cannot reach the LLM server at {url!r}: {reason}") from exc


def gguf_llm(gguf: str, base_url: Optional[str], model: Optional[str], **limits: Any) -> Any:
    """Start llama.cpp's server for ``gguf`` on 127.0.0.1 (stopped at exit) and return a client for it; the
    context window (``--context-window``, else the environment, else the server's 4096) is the server's ``n_ctx``."""
    import atexit

    from llama_index_convrag.config.llm import OpenAICompatible
    from llama_index_convrag.config.model_limits import ServerLimits, resolve_limits
    from llama_index_convrag.errors import ConfigurationError
    from llama_index_convrag.config.llamacpp_server import INSTALL_HINT, LlamaServer, LlamaServerError, has_server
    from llama_index_convrag.testing.real_llm import RealLLMUnavailable, locate

    if base_url is not None or model is not None:
        raise CLIError(EXIT_USAGE, "--gguf serves its own model; drop --base-url / --model")
    if not Path(gguf).is_file():
        raise CLIError(EXIT_INPUT, f"GGUF model file not found: {gguf!r}")
    python: Any = sys.executable
    if not has_server(python):
        try:  # the real-LLM tier's runtime, when it is set up on this machine
            python = locate().python
        except RealLLMUnavailable:
            raise CLIError(EXIT_LLM, f"--gguf needs llama-cpp-python's server, which {sys.executable} cannot "
                                     f"import: {INSTALL_HINT}") from None
    try:
        chosen = resolve_limits(**limits, env=os.environ,
                                server=ServerLimits(context_window=GGUF_CONTEXT_WINDOW, endpoint="--gguf n_ctx"))
    except ConfigurationError as exc:
        raise CLIError(EXIT_USAGE, str(exc)) from exc
    server = LlamaServer(gguf, python=python, n_ctx=chosen.context_window)
    try:
        server.start()
    except LlamaServerError as exc:
        raise CLIError(EXIT_LLM, f"cannot serve {gguf!r}: {exc}") from exc
    atexit.register(server.stop)
    return OpenAICompatible(**server.client_kwargs(max_tokens=chosen.max_tokens, timeout=chosen.timeout),
                            limit_sources=chosen.sources)


def llm_error(exc: BaseException) -> Optional[CLIError]:
    """An exit-5 error for an OpenAI client failure (refused key, unreachable server), else None."""
    try:
        import openai
    except ImportError:  # pragma: no cover - openai comes with llama-index-llms-openai
        return None
    seen = exc
    for _ in range(5):
        if isinstance(seen, (openai.AuthenticationError, openai.PermissionDeniedError)):
            return CLIError(EXIT_LLM, f"the LLM server refused the API key: {seen}")
        if isinstance(seen, openai.APIConnectionError):
            return CLIError(EXIT_LLM, f"cannot reach the LLM server: {seen}")
        if isinstance(seen, openai.APIStatusError):
            return CLIError(EXIT_LLM, f"the LLM server answered HTTP {seen.status_code}: {seen}")
        if seen.__cause__ is None:
            break
        seen = seen.__cause__
    return None


def default_store_path(target: Any) -> Path:
    """``convrag_chats.db`` next to a Milvus Lite file, else in the working directory."""
    if target.is_lite:
        return Path(target.uri).expanduser().resolve().parent / STORE_FILE
    return Path.cwd() / STORE_FILE


def collection_name_for(name: str, prefix: str) -> str:
    """A valid Milvus collection name from a data set name (letters, digits, underscores)."""
    clean = re.sub(r"[^0-9A-Za-z_]", "_", name).strip("_") or "data"
    return f"{prefix}_{clean}"[:255]
