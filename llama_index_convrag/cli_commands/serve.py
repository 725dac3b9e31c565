"""``convrag serve [PATH...]``: ingest PATHs (idempotent), then serve the chat engine over HTTP (docs/SERVE.md).

The engine is built as ``convrag chat`` builds it (same options); ``--memory`` adds memory for long conversations
(``memory_options.py``: one ``ConversationMemory`` per process, shared by every knowledge base's engine). With
``--workers N`` uvicorn starts N processes; each builds its parts from the same options (passed in
``CONVRAG_SERVE_OPTIONS``) through :func:`app_from_env`.
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
from llama_index_convrag.cli_commands.memory_options import memory_options, memory_parts

ENV_OPTIONS = "CONVRAG_SERVE_OPTIONS"
LIMIT_OPTIONS = ("max_body_bytes", "max_upload_bytes", "max_question_chars", "max_page_size", "turn_timeout_s",
                 "resume_grace_s", "lease_s", "partial_save_s")
EXTRA_HINT = "convrag serve needs the serve extra: pip install 'llama-index-convrag[serve]'"


def build_app(args: Any) -> Any:
    """The app over parts built from ``args`` (one process's worth): one engine template per knowledge base
    collection, built from the same options on the base's first turn."""
    from pathlib import Path

    from llama_index_convrag.indices import ConvRAGIndex
    from llama_index_convrag.memory import ConversationMemory
    from llama_index_convrag.serve import (DocumentBackend, EnginesPerCollection, Limits, RateLimits, create_app)
    from llama_index_convrag.storage.conversation import SQLiteConversationStore
    from llama_index_convrag.storage.conversation.recovery import open_lease

    llm = resolve_llm(args.base_url, args.model, args.gguf, **limit_kwargs(args))
    check_llm_needs(args, llm is not None)
    memory_options(args, llm is not None)  # usage errors before anything is opened
    target, client = connect(args.uri)
    options = memory_options(args, llm is not None, shared_milvus=not target.is_lite)
    require_collection(client, args.collection)
    model = embed_model()
    store = open_serve_store(args.store, args.uri)
    if isinstance(store, SQLiteConversationStore):  # held for the process: a killed run's turns become 'interrupted'
        open_lease(store, Path(store.path))
    memory = None if options is None else ConversationMemory.from_defaults(
        options, store=store, embed_model=model, client=client, target=target, llm=llm)

    def build(collection: str) -> Any:
        index = ConvRAGIndex.from_collection(collection, embed_model=model, client=client, target=target)
        return index.as_chat_engine(conversation_store=store, memory=memory, **engine_kwargs(args, llm),
                                    retriever_kwargs=retriever_kwargs(args, llm, model))

    limits = Limits(**{k: getattr(args, k) for k in LIMIT_OPTIONS})
    rate = RateLimits(requests=_rate(args.rate_limit), turns=_rate(args.turn_rate_limit))
    uploads = Path(args.upload_dir) if args.upload_dir is not None else Path("convrag_uploads")
    answering = None if llm is None else str(getattr(llm.metadata, "model_name", type(llm).__name__))
    return create_app(store=store, engine_for=EnginesPerCollection(build), limits=limits, llm=answering,
                      collection=args.collection, rate_limits=rate, cors_origins=args.cors_origin or (),
                      worker_name=f"{args.host}:{args.port}" if args.workers == 1 else None, memory=memory,
                      documents_backend=DocumentBackend(client=client, embed_model=model, upload_dir=uploads.resolve(),
                                                        target=target))


def _rate(value: str) -> Any:
    return None if value in ("off", "none", "0") else value


def app_from_env() -> Any:
    """uvicorn ``--factory`` entry of each worker: the options the parent put in ``CONVRAG_SERVE_OPTIONS``."""
    return build_app(argparse.Namespace(**json.loads(os.environ[ENV_OPTIONS])))


def cmd_serve(args: Any, out: Output) -> int:
    try:
        import fastapi  # noqa: F401
        import limits  # noqa: F401
        import uvicorn
    except ImportError as exc:
        raise CLIError(EXIT_USAGE, f"{EXTRA_HINT} ({exc.name} is missing)") from exc

    from llama_index_convrag.milvus.client import resolve_milvus
    from llama_index_convrag.serve.auth import check_bind
    from llama_index_convrag.serve.ratelimit import RateLimits

    args.conversation = None
    check_static(args)
    memory_parts(args.memory)  # an unknown part: exit 2 before anything is opened
    try:
        RateLimits(requests=_rate(args.rate_limit), turns=_rate(args.turn_rate_limit))
    except ValueError as exc:
        raise CLIError(EXIT_USAGE, str(exc)) from exc
    target = resolve_milvus(args.uri)
    if args.workers > 1 and (target.is_lite or args.store is None or not str(args.store).startswith("postgresql")):
        raise CLIError(EXIT_USAGE, "--workers > 1 needs a Milvus server (--uri http://...) and the PostgreSQL store "
                                   "(--store postgresql+psycopg://...): a Milvus Lite file and a SQLite store belong "
                                   "to one process")
    with open_serve_store(args.store, args.uri) as store:
        try:
            check_bind(args.host, store)
        except ValueError as exc:
            raise CLIError(EXIT_USAGE, str(exc)) from exc
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
