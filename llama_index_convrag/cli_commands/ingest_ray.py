"""``convrag ingest --engine ray --workers N``: the Ray Data engine (``ingest.distributed``) into a Milvus server.

The embedding model is rebuilt in every Ray worker from the settings this process sees (``CONVRAG_EMBED_MODEL``,
``OPENAI_API_KEY``, ``OPENAI_BASE_URL``), captured here so that workers on other machines use the same model.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any, Dict

from llama_index_convrag.cli_commands.common import EXIT_INPUT, EXIT_USAGE, CLIError, Output


def cmd_ingest_ray(args: Any, out: Output) -> int:
    from llama_index_convrag.config.embedding import ENV_EMBED_MODEL, resolve_embed_model
    from llama_index_convrag.config.llm import ENV_API_KEY, ENV_BASE_URL
    from llama_index_convrag.errors import ConfigurationError
    from llama_index_convrag.ingest.distributed import ingest_distributed
    from llama_index_convrag.milvus.client import resolve_milvus

    settings = {k: os.environ[k] for k in (ENV_EMBED_MODEL, ENV_API_KEY, ENV_BASE_URL) if k in os.environ}
    options: Dict[str, Any] = {k: v for k, v in (("chunk_size", args.chunk_size), ("chunk_overlap", args.chunk_overlap),
                                                 ("analyzer", args.analyzer)) if v is not None}
    try:
        report = ingest_distributed(list(args.paths), collection_name=args.collection, target=resolve_milvus(args.uri),
                                    embed_factory=partial(resolve_embed_model, None, env=settings),
                                    workers=args.workers, delete_missing=args.delete_missing,
                                    show_progress=out.progress, **options)
    except ConfigurationError as exc:  # a Lite file, Ray missing, a bad setting
        raise CLIError(EXIT_USAGE, str(exc)) from exc
    if out.json_mode:
        out.json(report.to_dict())
    elif not out.quiet:
        out.text(str(report))
    unstored = [Path(p).name for p, _ in report.failed] + [Path(p).name for p in report.incomplete]
    if unstored:
        out.stderr.write(f"convrag: error: {len(unstored)} file(s) not stored: {', '.join(unstored)}\n")
        return EXIT_INPUT
    return 0
