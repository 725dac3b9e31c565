"""What one server process shares between requests: the store, the engines, the documents, the limits, the rate
limiter and the logs of the turns it is streaming."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Tuple, TypeVar

from starlette.concurrency import run_in_threadpool

from llama_index_convrag._limits import MAX_QUESTION_CHARS
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.conversation import ConversationMemory
from llama_index_convrag.memory.options import MemoryOptions
from llama_index_convrag.serve.events import TurnLogs
from llama_index_convrag.serve.ratelimit import RateLimiter, RateLimits
from llama_index_convrag.storage.conversation._sql import SQLConversationStore
from llama_index_convrag.storage.conversation.knowledge import KnowledgeBase
from llama_index_convrag.storage.conversation.sqlite import SQLiteConversationStore

#: conversation id, turn port, knowledge base -> a chat engine for that conversation (its turns through the port)
#: sharing the built parts
EngineFor = Callable[[str, Any, KnowledgeBase], Any]
T = TypeVar("T")
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """Request limits; each breach is a 4xx naming the limit."""

    max_body_bytes: int = 1 << 20
    max_upload_bytes: int = 20 << 20
    max_question_chars: int = MAX_QUESTION_CHARS
    max_page_size: int = 100
    default_page_size: int = 20
    #: how long a turn claim made without a registered worker lasts (the app's own worker holds its claims under
    #: ``lease_s`` instead)
    turn_timeout_s: float = 600.0
    #: the worker's lease: renewed every third of it; a worker that dies frees its conversations (their answers
    #: ``interrupted``) when it lapses, or at once when it restarts under its name
    lease_s: float = 10.0
    #: a streaming answer's text so far is saved at most this often (bounded writes; what a crash keeps)
    partial_save_s: float = 1.0
    #: a streamed answer whose client went away keeps answering this long (a client may resume it with
    #: Last-Event-ID), then it is cancelled; 0: cancelled at once. POST /v1/messages/{id}/cancel stops it now.
    resume_grace_s: float = 10.0
    #: a ``: ping`` comment on a stream after this many seconds without an event (proxies close idle connections)
    ping_s: float = 15.0

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_upload_bytes", "max_question_chars", "max_page_size",
                     "default_page_size"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.default_page_size > self.max_page_size:
            raise ConfigurationError(f"default_page_size ({self.default_page_size}) must be <= max_page_size "
                                     f"({self.max_page_size})")
        for name in ("turn_timeout_s", "lease_s", "partial_save_s"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}")
        if self.resume_grace_s < 0:
            raise ConfigurationError(f"resume_grace_s must be >= 0, got {self.resume_grace_s!r}")
        if self.ping_s <= 0:
            raise ConfigurationError(f"ping_s must be > 0, got {self.ping_s!r}")


def calls_on_loop(store: SQLConversationStore) -> bool:
    """Whether a store's calls belong on the event loop by default: a SQLite file's do (each call is a local read or
    a short write; in the thread pool every call would wait for the interpreter lock behind the loop's work, which
    under load costs a turn tens of milliseconds), a PostgreSQL server's do not (they wait on the network)."""
    return isinstance(store, SQLiteConversationStore)


@dataclass
class ServeState:
    """Built once per process; requests only read it (the lifespan sets ``default_kb`` and ``worker_id`` at startup)."""

    store: SQLConversationStore
    engine_for: EngineFor
    limits: Limits = field(default_factory=Limits)
    documents: Optional[Any] = None
    model_name: str = "convrag"
    #: text deltas that arrive within this many seconds of the last one sent go out together (one SSE frame)
    stream_window_s: float = 0.02
    #: the async routes' store calls (a turn's two, the key check) run on the event loop (True: only for a local
    #: store such as SQLite, whose calls never wait on the network) or in the thread pool (False); None: on the loop
    #: for a SQLite store, in the thread pool for any other (see :func:`calls_on_loop`)
    store_on_loop: Optional[bool] = None
    rate_limits: RateLimits = field(default_factory=RateLimits)
    #: the collection of the server's own knowledge base (the corpus ``convrag serve`` ingests); None: none
    default_collection: Optional[str] = None
    #: CORS origins allowed to call the API from a browser (empty: none)
    cors_origins: Tuple[str, ...] = ()
    default_kb: Optional[KnowledgeBase] = None
    #: the name this process's worker registers under (its claims survive nothing: a restart under the same name
    #: frees them at once); None: the lifespan names it ``<host>:<pid>`` (freed when its lease lapses)
    worker_name: Optional[str] = None
    #: the registered worker's id (set by the lifespan; None: claims last ``limits.turn_timeout_s``)
    worker_id: Optional[str] = None
    #: the memory the engines were built with (their turns load and write it; the memory routes read and edit it);
    #: None: memory off
    memory: Optional[ConversationMemory] = None
    rate: RateLimiter = field(init=False)
    logs: TurnLogs = field(init=False)
    #: what the memory routes act on: ``memory``, or with memory off a view of the store's memory rows (every part
    #: off: what is stored can still be read, edited and deleted)
    memory_view: ConversationMemory = field(init=False)

    def __post_init__(self) -> None:
        if self.stream_window_s < 0:
            raise ConfigurationError(f"stream_window_s must be >= 0, got {self.stream_window_s!r}")
        if self.store_on_loop is None:
            self.store_on_loop = calls_on_loop(self.store)
        self.rate = RateLimiter(self.rate_limits)
        self.logs = TurnLogs()
        if self.memory is not None and not isinstance(self.memory, ConversationMemory):
            raise ConfigurationError(f"memory must be a ConversationMemory or None, got {type(self.memory).__name__}")
        if self.memory is not None and self.memory.store is not self.store:
            raise ConfigurationError("the memory keeps its rows in another store than the server's; build "
                                     "ConversationMemory.from_defaults(store=<the server's store>)")
        self.memory_view = self.memory if self.memory is not None else ConversationMemory(
            options=MemoryOptions.off(), store=self.store)

    def engine_ready(self, knowledge_base: Optional[KnowledgeBase]) -> bool:
        """Whether a turn on ``knowledge_base`` finds its engine built (or builds none: ``engine_for`` keeps no
        templates)."""
        has = getattr(self.engine_for, "has", None)
        return knowledge_base is None or has is None or bool(has(knowledge_base.collection))

    async def prepare_engine(self, knowledge_base: Optional[KnowledgeBase]) -> None:
        """Build a knowledge base's engine template in the thread pool before its first turn is opened (building it
        reads the collection's layout and loads tokenizers: seconds the event loop must not wait). A failure is
        logged and left to the turn: opening it builds the engine again, and if that fails too the request answers
        ``internal_error`` with an error id before anything of the turn is stored."""
        if self.engine_ready(knowledge_base):
            return
        assert knowledge_base is not None
        try:
            await run_in_threadpool(self.engine_for.template, knowledge_base.collection)  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - the turn builds it again and reports the error in its own shape
            logger.warning("building the engine of knowledge base %s failed", knowledge_base.id, exc_info=True)

    async def store_call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, a blocking store call, where ``store_on_loop`` says."""
        if self.store_on_loop:
            return fn(*args)
        return await run_in_threadpool(fn, *args)
