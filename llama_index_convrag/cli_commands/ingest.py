"""``convrag ingest`` and the ingest step of ``ask``/``chat`` (progress, interruption, what was not ingested)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from llama_index_convrag.cli_commands.common import (EXIT_INPUT, EXIT_MILVUS, EXIT_USAGE, CLIError, Output,
                                                     check_dimension, check_free_space, connect, discard_created,
                                                     embed_model, keep_created, no_space_error, resolve_target,
                                                     space_watch)

#: Seconds between progress lines when stderr is not a terminal (logs, pipes, CI).
PROGRESS_LINE_SECONDS = 10.0


def candidate_files(paths: Sequence[str]) -> List[Path]:
    """The files under ``paths`` that have a reader; exit 3 before anything is opened or created when none has.

    Binary files with a text suffix are only found when read, and are then listed as unsupported.
    """
    from llama_index_convrag.ingest.pipeline import collect_files
    from llama_index_convrag.ingest.readers import READERS

    try:
        files, _ = collect_files(list(paths))
    except FileNotFoundError as exc:
        raise CLIError(EXIT_INPUT, str(exc)) from exc
    where = ", ".join(map(repr, paths))
    if not files:
        raise CLIError(EXIT_INPUT, f"no files under {where} (empty folder?)")
    readable = [f for f in files if f.suffix.lower() in READERS]
    if not readable:
        kinds = sorted({f.suffix or f.name for f in files})
        raise CLIError(EXIT_INPUT, f"no supported files among {len(files)} under {where} (found: {kinds}); "
                                   f"supported: {' '.join(sorted(READERS))}")
    return readable


def run_ingest(paths: Sequence[str], client: Any, target: Any, collection: str, model: Any, out: Output, *,
               delete_missing: bool = False, chunk_size: Optional[int] = None,
               chunk_overlap: Optional[int] = None, analyzer: Optional[str] = None) -> Any:
    """Ingest ``paths`` into ``collection``; exit 3 when none of the files could be ingested (reasons listed), exit 9
    when the disk is (or would be) full. A Lite file this run created is removed again when it fails (not when it
    is interrupted: re-running resumes)."""
    try:
        report = _run_ingest(paths, client, target, collection, model, out, delete_missing=delete_missing,
                             chunk_size=chunk_size, chunk_overlap=chunk_overlap, analyzer=analyzer)
    except Exception:
        discard_created()
        raise
    keep_created()
    return report


def _run_ingest(paths: Sequence[str], client: Any, target: Any, collection: str, model: Any, out: Output, *,
                delete_missing: bool, chunk_size: Optional[int], chunk_overlap: Optional[int],
                analyzer: Optional[str]) -> Any:
    from llama_index_convrag.ingest import ingest

    files = candidate_files(paths)
    check_free_space(target, files)
    check_dimension(client, collection, model)
    if analyzer is None and not client.has_collection(collection):
        from llama_index_convrag.ingest.language import choose_analyzer

        choice = choose_analyzer(files)
        analyzer = choice.analyzer
        out.note(str(choice))
    options: Dict[str, Any] = {"show_progress": out.progress}
    if not out.progress and not out.quiet:
        options["progress_every"] = PROGRESS_LINE_SECONDS
        options["progress_stream"] = out.stderr
    if chunk_size is not None:
        options["chunk_size"] = chunk_size
    if chunk_overlap is not None:
        options["chunk_overlap"] = chunk_overlap
    if analyzer is not None:
        options["analyzer"] = analyzer
    try:
        with space_watch(target, out.stderr):
            report = ingest(list(paths), collection_name=collection, embed_model=model, client=client,
                            target=target, delete_missing=delete_missing, **options)
    except ValueError as exc:  # splitter settings, foreign layout
        raise CLIError(EXIT_INPUT if "layout" in str(exc) else EXIT_USAGE, str(exc)) from exc
    except Exception as exc:
        full = no_space_error(target, exc)
        if full is not None:
            raise full from exc
        if "unknown tokenizer type" in str(exc):  # Milvus Lite 3.x has no 'english' analyzer
            raise CLIError(EXIT_MILVUS, f"this Milvus cannot build the {options.get('analyzer', 'english')!r} BM25 "
                                        f"analyzer ({exc}); pass --analyzer standard") from exc
        raise
    readable = len(report.added) + len(report.updated) + len(report.unchanged)
    if readable == 0:
        reasons = "; ".join(f"{Path(p).name}: {r}" for p, r in [*report.unsupported, *report.failed][:5])
        raise CLIError(EXIT_INPUT, f"nothing could be ingested from {', '.join(map(repr, paths))}: {reasons}")
    return report


def not_ingested_notes(report: Any) -> List[str]:
    """One line per file that was not ingested, with the reason (the words match ``IngestReport``'s fields)."""
    return ([f"  unsupported {Path(p).name}: {r}" for p, r in report.unsupported]
            + [f"  failed {Path(p).name}: {r}" for p, r in report.failed])


def cmd_ingest(args: Any, out: Output) -> int:
    files = candidate_files(args.paths)  # before connecting: nothing is created when nothing can be ingested
    check_free_space(resolve_target(args.uri), files)  # a disk too full says so before anything is opened
    if getattr(args, "engine", "local") == "ray":
        from llama_index_convrag.cli_commands.ingest_ray import cmd_ingest_ray
        return cmd_ingest_ray(args, out)
    target, client = connect(args.uri)
    model = embed_model()
    report = run_ingest(args.paths, client, target, args.collection, model, out,
                        delete_missing=args.delete_missing, chunk_size=args.chunk_size,
                        chunk_overlap=args.chunk_overlap, analyzer=args.analyzer)
    if out.json_mode:
        out.json(report.to_dict())
    elif not out.quiet:
        out.text(str(report))
    if report.failed:
        out.stderr.write(f"convrag: error: {len(report.failed)} file(s) could not be ingested: "
                         f"{', '.join(Path(p).name for p, _ in report.failed)} (the others are stored)\n")
        return EXIT_INPUT
    return 0
