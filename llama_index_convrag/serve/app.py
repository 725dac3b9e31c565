"""``create_app``: the FastAPI application of ``convrag serve`` (mount it in your own ASGI app as well)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from fastapi import FastAPI
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from llama_index_convrag.serve import conversations, documents, openai_compat
from llama_index_convrag.serve.errors import install_error_handlers
from llama_index_convrag.serve.limits import BodyLimitMiddleware
from llama_index_convrag.serve.state import EngineFor, Limits, ServeState
from llama_index_convrag.storage.conversation._sql import SQLConversationStore

STATIC_DIR = Path(__file__).resolve().parent / "static"


def create_app(*, store: SQLConversationStore, engine_for: EngineFor, limits: Optional[Limits] = None,
               documents_backend: Optional[Any] = None, model_name: str = "convrag",
               llm: Optional[str] = None, stream_window_s: float = 0.02,
               store_on_loop: Optional[bool] = None) -> FastAPI:
    """The API over built parts.

    ``store``: the conversation store (SQLite or PostgreSQL; keys, owners and turn claims live there).
    ``engine_for(conversation_id, store)``: a ``ConvRAGChatEngine`` for one conversation sharing the expensive parts
    (:func:`~.engines.shared_engine_for` makes one from a built engine). ``documents_backend``: a
    :class:`~.documents.DocumentBackend` for the ``/v1/documents`` routes (None: they answer 404 ``no_documents``).
    ``llm``: the answering LLM's model name, ``None`` when answers are extractive (``GET /v1/health`` says which).
    ``stream_window_s``: streamed text deltas that arrive within this many seconds of the last one sent go out as one
    event (0: one event per delta). ``store_on_loop``: the async routes (a turn, the key check) make their store
    calls on the event loop (True; a local store only: SQLite) or in the thread pool (False); None (default): on the
    loop for a SQLite store, in the thread pool for PostgreSQL.
    """
    app = FastAPI(title="convrag serve", version="1", description="Conversational RAG over HTTP (docs/SERVE.md).")
    app.state.serve = ServeState(store=store, engine_for=engine_for, limits=limits if limits is not None else Limits(),
                                 documents=documents_backend, model_name=model_name,
                                 stream_window_s=stream_window_s, store_on_loop=store_on_loop)
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, limits=app.state.serve.limits)
    app.include_router(openai_compat.router)
    app.include_router(conversations.router)
    app.include_router(documents.router)

    @app.get("/v1/health", tags=["meta"])
    def health() -> JSONResponse:
        return JSONResponse({"status": "ok", "llm": llm, "answers": "llm" if llm is not None else "extractive"})

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
