"""``convrag serve [PATH...]``: ingest PATHs (idempotent), then serve the chat engine over HTTP (docs/SERVE.md).

The engine is built as ``convrag chat`` builds it (same options). With ``--workers N`` uvicorn starts N processes;
each builds its parts from the same options (passed in ``CONVRAG_SERVE_OPTIONS``) through :func:`app_from_env`.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Dict

from llama_index_convrag.cli_commands.common import (EXIT_USAGE, CLIError, Output, connect, embed_model,
                                                     require_collection, resolve_llm)
from llama_index_convrag.cli_commands.engine_options import (check_llm_needs, check_static, engine_kwargs,
                                                             limit_kwargs, retriever_kwargs)
from llama_index_convrag.cli_commands.ingest import run_ingest
from llama_index_convrag.cli_commands.keys import open_serve_store

ENV_OPTIONS = "CONVRAG_SERVE_OPTIONS"
LIMIT_OPTIONS = ("max_body_bytes", "max_upload_bytes", "max_question_chars", "max_page_size", "turn_timeout_s")


def build_app(args: Any) -> Any:
    """The app over parts built from ``args`` (one process's worth)."""
    from pathlib import Path

    from llama_index_convrag.indices import ConvRAGIndex
    from llama_index_convrag.serve import DocumentBackend, Limits, create_app, shared_engine_for
    from llama_index_convrag.storage.conversation import SQLiteConversationStore
    from llama_index_convrag.storage.conversation.recovery import open_lease

    llm = resolve_llm(args.base_url, args.model, args.gguf, **limit_kwargs(args))
    check_llm_needs(args, llm is not None)
    target, client = connect(args.uri)
    require_collection(client, args.collection)
    model = embed_model()
    index = ConvRAGIndex.from_collection(args.collection, embed_model=model, client=client, target=target)
    store = open_serve_store(args.store, args.uri)
    if isinstance(store, SQLiteConversationStore):  # held for the process: turns of a killed run become 'error'
        open_lease(store, Path(store.path))
    template = index.as_chat_engine(conversation_store=store, **engine_kwargs(args, llm),
                                    retriever_kwargs=retriever_kwargs(args, llm, model))
    limits = Limits(**{k: getattr(args, k) for k in LIMIT_OPTIONS})
    uploads = Path(args.upload_dir) if args.upload_dir is not None else Path("convrag_uploads")
    answering = None if llm is None else str(getattr(llm.metadata, "model_name", type(llm).__name__))
    return create_app(store=store, engine_for=shared_engine_for(template), limits=limits, llm=answering,
                      documents_backend=DocumentBackend(client=client, collection_name=args.collection,
                                                        embed_model=model, upload_dir=uploads.resolve()))


def app_from_env() -> Any:
    """uvicorn ``--factory`` entry of each worker: the options the parent put in ``CONVRAG_SERVE_OPTIONS``."""
    return build_app(argparse.Namespace(**json.loads(os.environ[ENV_OPTIONS])))


def cmd_serve(args: Any, out: Output) -> int:
    import uvicorn

    from llama_index_convrag.milvus.client import resolve_milvus
    from llama_index_convrag.serve.auth import check_bind

    args.conversation = None
    check_static(args)
    target = resolve_milvus(args.uri)
    if args.workers > 1 and (target.is_lite or args.store is None or not str(args.store).startswith("postgresql")):
        raise CLIError(EXIT_USAGE, "--workers > 1 needs a Milvus server (--uri http://...) and the PostgreSQL store "
                                   "(--store postgresql+psycopg://...): a Milvus Lite file and a SQLite store belong "
                                   "to one process")
    store = open_serve_store(args.store, args.uri)
    try:
        check_bind(args.host, store)
    except ValueError as exc:
        raise CLIError(EXIT_USAGE, str(exc)) from exc
    finally:
        store.close()
    if args.paths:
        _, client = connect(args.uri)
        report = run_ingest(list(args.paths), client, target, args.collection, embed_model(), out)
        out.note(f"ingest: {len(report.added)} added, {len(report.updated)} updated, {len(report.unchanged)} "
                 f"unchanged ({report.chunks} new chunks)")
    options: Dict[str, Any] = {k: v for k, v in vars(args).items() if k != "func"}
    os.environ[ENV_OPTIONS] = json.dumps(options)
    out.note(f"serving on http://{args.host}:{args.port} ({args.workers} worker(s)); API: docs/SERVE.md, "
             f"schema: /openapi.json")
    uvicorn.run("llama_index_convrag.cli_commands.serve:app_from_env", factory=True, host=args.host, port=args.port,
                workers=args.workers, log_level="debug" if args.debug else "warning")
    return 0
