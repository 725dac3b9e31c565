"""``create_app``: the FastAPI application of ``convrag serve`` (mount it in your own ASGI app as well).

Its lifespan owns the parts it is given: at startup it opens the store (migrating it), registers the server's own
knowledge base (the corpus's collection, read by every user) and the process's worker (``worker.py``: its turn claims
under a lease it renews; a stopped worker's unfinished answers become ``interrupted``), loads the text rules' models and keeps
what it built out of the garbage collector's full scans (``startup.py``); at shutdown it cancels the
turns still streaming (each stored ``cancelled``), unregisters the worker, waits for the memory writes queued so far
(:data:`MEMORY_CLOSE_S` at most), closes the store and the document index's Milvus client.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Dict, Optional, Sequence

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from llama_index_convrag.memory.conversation import ConversationMemory
from llama_index_convrag.serve import admin, conversations, knowledge, memory_routes, openai_compat
from llama_index_convrag.serve.errors import install_error_handlers
from llama_index_convrag.serve.limits import BodyLimitMiddleware
from llama_index_convrag.serve.models import Health
from llama_index_convrag.serve.ratelimit import RateLimits
from llama_index_convrag.serve.startup import freeze_heap, preload_text_rules, thaw_heap
from llama_index_convrag.serve.state import EngineFor, Limits, ServeState
from llama_index_convrag.serve.worker import WorkerLease
from llama_index_convrag.storage.conversation._sql import DEFAULT_OWNER, SQLConversationStore
from llama_index_convrag.storage.conversation.knowledge import EVERYONE, KnowledgeBase, check_kb_name

logger = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).resolve().parent / "static"
#: the collection ``convrag ingest`` / ``convrag serve`` fill by default
DEFAULT_COLLECTION = "convrag"
#: at shutdown, the memory writes still queued are waited for this long (seconds) before the store closes
MEMORY_CLOSE_S = 30.0


def register_default_kb(state: ServeState, collection: str) -> KnowledgeBase:
    """The server's own knowledge base (its corpus's collection): made on first start (by whichever worker of a
    multi-worker server comes first), owned by the operator (``local``) and read by every user (member ``*``); its
    folders are the corpus's common folder (blocking)."""
    store = state.store
    roots = state.documents.corpus_roots(collection) if state.documents is not None else ()
    kb = store.knowledge_base_of_collection(collection)
    if kb is None:
        name = collection if _valid_name(collection) else "default"
        try:
            kb = store.create_knowledge_base(name, DEFAULT_OWNER, collection=collection, roots=roots,
                                             readers=[EVERYONE])
        except Exception:  # noqa: BLE001 - another worker starting on the same store made it first
            kb = store.knowledge_base_of_collection(collection)
            if kb is None:
                raise
    elif tuple(kb.roots) != tuple(roots) and roots:
        kb = store.update_knowledge_base(kb.id, roots=roots) or kb
    return kb


def _valid_name(name: str) -> bool:
    try:
        check_kb_name(name)
    except ValueError:
        return False
    return True


def create_app(*, store: SQLConversationStore, engine_for: EngineFor, limits: Optional[Limits] = None,
               documents_backend: Optional[Any] = None, collection: str = DEFAULT_COLLECTION,
               model_name: str = "convrag", llm: Optional[str] = None, stream_window_s: float = 0.02,
               store_on_loop: Optional[bool] = None, rate_limits: Optional[RateLimits] = None,
               cors_origins: Sequence[str] = (), worker_name: Optional[str] = None,
               memory: Optional[ConversationMemory] = None) -> FastAPI:
    """The API over built parts (the app's lifespan opens the store and closes the store and the document index).

    ``store``: the conversation store (SQLite or PostgreSQL; keys, owners, knowledge bases and turn claims live
    there). ``engine_for(conversation_id, port, knowledge_base)``: a ``ConvRAGChatEngine`` for one conversation
    answering from that base's collection (:class:`~.engines.EnginesPerCollection` builds one template per
    collection; :func:`~.engines.shared_engine_for` serves one base). ``documents_backend``: a
    :class:`~.documents.DocumentBackend` for the document routes (None: they answer 404 ``no_documents``).
    ``collection``: the server's own knowledge base (its corpus). ``llm``: the answering LLM's model name, ``None``
    when answers are extractive (``GET /v1/health`` says which). ``stream_window_s``: streamed text deltas that
    arrive within this many seconds of the last one sent go out as one event (0: one event per delta).
    ``store_on_loop``: the async routes make their store calls on the event loop (True; a local store only: SQLite)
    or in the thread pool (False); None (default): on the loop for a SQLite store, in the thread pool for
    PostgreSQL. ``rate_limits``: per key (:class:`~.ratelimit.RateLimits`, default 1200 requests and 60 turns a
    minute). ``cors_origins``: browser origins allowed to call the API (none by default). ``worker_name``: the name
    the process's turn claims are held under; a server restarted under the same name frees its earlier claims at once
    (``convrag serve`` uses ``host:port``); None: ``host:pid``, freed when the lease (``limits.lease_s``) lapses.
    ``memory``: the ``ConversationMemory`` the engines ``engine_for`` makes were built with (``memory=``): the memory
    routes read and edit it, a deleted conversation's recalled messages go with it, shutdown waits for its writes;
    None: memory off (the memory routes still read, edit and delete what the store holds).
    """
    state = ServeState(store=store, engine_for=engine_for, limits=limits if limits is not None else Limits(),
                       documents=documents_backend, model_name=model_name, stream_window_s=stream_window_s,
                       store_on_loop=store_on_loop,
                       rate_limits=rate_limits if rate_limits is not None else RateLimits(),
                       default_collection=collection, cors_origins=tuple(cors_origins), worker_name=worker_name,
                       memory=memory)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[Dict[str, Any]]:
        await run_in_threadpool(store.open)
        state.default_kb = await run_in_threadpool(register_default_kb, state, collection)
        await state.prepare_engine(state.default_kb)  # its engine is ready before the first turn
        worker = WorkerLease(state)
        await worker.start()
        await run_in_threadpool(preload_text_rules)  # not by the first turn, with every turn in flight waiting
        freeze_heap()  # what startup built lives as long as the process: out of the collector's full scans
        try:
            yield {"serve": state}
        finally:
            thaw_heap()
            await state.logs.cancel_all()
            await worker.stop()
            if memory is not None:  # its writes need the store: they end first
                await run_in_threadpool(memory.close, MEMORY_CLOSE_S)
            store.close()
            if state.documents is not None:
                state.documents.close()

    app = FastAPI(title="convrag serve", version="2", lifespan=lifespan,
                  description="Conversational RAG over HTTP: knowledge bases with roles, conversations, an "
                              "OpenAI-compatible endpoint (docs/SERVE.md).")
    app.state.serve = state  # for code that holds the app (benches, tests): routes read the lifespan's state
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, limits=state.limits)
    if state.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(state.cors_origins), allow_credentials=False,
                           allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                           allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
                           expose_headers=["Retry-After"], max_age=600)
    for module in (openai_compat, conversations, memory_routes, knowledge, admin):
        app.include_router(module.router)

    @app.get("/v1/health", tags=["meta"], responses={200: {"model": Health}})
    def health() -> Dict[str, Any]:
        return {"status": "ok", "llm": llm, "answers": "llm" if llm is not None else "extractive"}

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
