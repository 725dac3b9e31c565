"""``convrag docs list`` and ``convrag docs remove``: the documents stored in a collection, and removing them.

Documents are named by the resolved path of their file. ``--missing`` selects those whose file no longer exists
(a renamed or deleted folder), under any folder ever ingested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List

from llama_index_convrag.cli_commands.common import (EXIT_INPUT, EXIT_USAGE, CLIError, Output, connect,
                                                     require_collection)


def _folder(path: Any) -> Any:
    return None if path is None else Path(path).expanduser().resolve()


def _select(client: Any, args: Any) -> List[Any]:
    from llama_index_convrag.ingest.documents import list_documents

    try:
        return list_documents(client, args.collection, folder=_folder(getattr(args, "under", None)),
                              missing_only=args.missing)
    except ValueError as exc:  # a collection without a document id field
        raise CLIError(EXIT_INPUT, str(exc)) from exc


def cmd_docs_list(args: Any, out: Output) -> int:
    _, client = connect(args.uri, create=False)
    require_collection(client, args.collection)
    docs = _select(client, args)
    if out.json_mode:
        out.json({"collection": args.collection, "documents": [d.to_dict() for d in docs]})
        return 0
    for d in docs:
        flags = ([] if d.exists else ["file missing"]) + \
            ([] if d.complete else [f"incomplete: {d.chunks} of {d.expected_chunks} chunks stored"])
        out.text(f"{d.doc_id}\t{d.chunks} chunks" + "".join(f"\t({f})" for f in flags))
    missing = sum(1 for d in docs if not d.exists)
    partial = sum(1 for d in docs if not d.complete)
    out.note(f"{len(docs)} documents in {args.collection!r}, {missing} with a missing file"
             + (f"; remove those with 'convrag docs remove --missing --collection {args.collection}'"
                if missing else "")
             + (f"; {partial} incomplete (an interrupted or failed run): the next 'convrag ingest' of their files "
                f"stores them again" if partial else ""))
    return 0


def cmd_docs_remove(args: Any, out: Output) -> int:
    from llama_index_convrag.ingest.documents import remove_documents, under

    if not args.missing and not args.paths:
        raise CLIError(EXIT_USAGE, "say what to remove: PATH... (documents at or under these paths) and/or --missing "
                                   "(documents whose file no longer exists)")
    _, client = connect(args.uri, create=False)
    require_collection(client, args.collection)
    docs = _select(client, args)
    if args.paths:
        roots = [_folder(p) for p in args.paths]
        docs = [d for d in docs if any(under(d.doc_id, r) for r in roots)]
    if not docs:
        raise CLIError(EXIT_INPUT, f"no stored document matches in {args.collection!r}; "
                                   f"see 'convrag docs list --collection {args.collection}'")
    if not args.dry_run:
        remove_documents(client, args.collection, [d.doc_id for d in docs])
    if out.json_mode:
        out.json({"collection": args.collection, "dry_run": args.dry_run,
                  "removed": [d.to_dict() for d in docs]})
    else:
        verb = "would remove" if args.dry_run else "removed"
        for d in docs:
            out.text(f"{verb} {d.doc_id} ({d.chunks} chunks)")
    return 0
