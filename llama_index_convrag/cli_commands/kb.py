"""``convrag kb list | create | ingest | share | unshare | members | delete``: the knowledge bases of ``convrag serve``
(rows in its store, one Milvus collection each; docs/SERVE.md)."""

from __future__ import annotations

from typing import Any

from llama_index_convrag.cli_commands.common import (EXIT_INPUT, EXIT_USAGE, CLIError, Output, connect,
                                                     embed_model)
from llama_index_convrag.cli_commands.ingest import run_ingest
from llama_index_convrag.cli_commands.keys import open_serve_store


def _find(store: Any, name: str) -> Any:
    """A knowledge base by name or id; exit 3 naming the known ones."""
    kb = store.knowledge_base_named(name) or store.knowledge_base(name)
    if kb is None:
        known = [k.name for k in store.list_knowledge_bases()]
        raise CLIError(EXIT_INPUT, f"no knowledge base named {name!r}; known: {known} (see 'convrag kb list')")
    return kb


def cmd_kb_list(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        rows = [(kb, store.members(kb.id)) for kb in store.list_knowledge_bases()]
    if out.json_mode:
        out.json({"knowledge_bases": [{**kb.to_dict(), "collection": kb.collection,
                                       "members": [m.to_dict() for m in members]} for kb, members in rows]})
        return 0
    for kb, members in rows:
        shared = ", ".join(f"{m.user_id}:{m.role}" for m in members if m.role != "owner") or "-"
        out.text(f"{kb.name}\t{kb.id}\towner {kb.owner}\tcollection {kb.collection}\tmembers {shared}")
    out.note(f"{len(rows)} knowledge bases")
    return 0


def cmd_kb_create(args: Any, out: Output) -> int:
    from llama_index_convrag.ingest.pipeline import Ingestor

    with open_serve_store(args.store, args.uri) as store:
        try:
            if args.owner != "local":
                store.ensure_user(args.owner)
            kb = store.create_knowledge_base(args.name, args.owner, description=args.description)
        except ValueError as exc:
            raise CLIError(EXIT_USAGE, str(exc)) from exc
        target, client = connect(args.uri)
        try:
            Ingestor.from_defaults(collection_name=kb.collection, embed_model=embed_model(), client=client,
                                   target=target, analyzer=args.analyzer)
        except BaseException:
            store.delete_knowledge_base(kb.id)
            raise
    if out.json_mode:
        out.json({**kb.to_dict(), "collection": kb.collection})
    else:
        out.text(f"{kb.name}\t{kb.id}")
        out.note(f"knowledge base {kb.name!r} owned by {kb.owner!r} (collection {kb.collection}); fill it with "
                 f"'convrag kb ingest {kb.name} PATH', share it with 'convrag kb share {kb.name} USER'")
    return 0


def cmd_kb_ingest(args: Any, out: Output) -> int:
    from llama_index_convrag.serve.documents import DocumentBackend

    with open_serve_store(args.store, args.uri) as store:
        kb = _find(store, args.name)
        target, client = connect(args.uri)
        model = embed_model()
        report = run_ingest(list(args.paths), client, target, kb.collection, model, out)
        roots = DocumentBackend(client=client, embed_model=model, upload_dir=".").corpus_roots(kb.collection)
        store.update_knowledge_base(kb.id, roots=roots)  # documents are named below their common folder
    if out.json_mode:
        out.json({"knowledge_base": kb.name, "added": len(report.added), "updated": len(report.updated),
                  "unchanged": len(report.unchanged), "chunks": report.chunks})
    else:
        out.text(f"{kb.name}: {len(report.added)} added, {len(report.updated)} updated, {len(report.unchanged)} "
                 f"unchanged ({report.chunks} new chunks)")
    return 0


def cmd_kb_share(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        kb = _find(store, args.name)
        try:
            member = store.set_member(kb.id, args.user, args.role)
        except ValueError as exc:
            raise CLIError(EXIT_USAGE, str(exc)) from exc
    if out.json_mode:
        out.json({"knowledge_base": kb.name, **member.to_dict()})
    else:
        who = "every user" if member.user_id == "*" else member.user_id
        out.text(f"{kb.name}: {who} is {member.role}")
    return 0


def cmd_kb_unshare(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        kb = _find(store, args.name)
        removed = store.remove_member(kb.id, args.user)
    if not removed:
        raise CLIError(EXIT_INPUT, f"{args.user!r} is not a member of {kb.name!r} other than its owner; see "
                                   f"'convrag kb members {kb.name}'")
    if out.json_mode:
        out.json({"knowledge_base": kb.name, "removed": args.user})
    else:
        out.text(f"{kb.name}: {args.user} removed")
    return 0


def cmd_kb_members(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        kb = _find(store, args.name)
        members = store.members(kb.id)
    if out.json_mode:
        out.json({"knowledge_base": kb.name, "members": [m.to_dict() for m in members]})
        return 0
    for m in members:
        out.text(f"{m.user_id}\t{m.role}")
    return 0


def cmd_kb_delete(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        kb = _find(store, args.name)
        _, client = connect(args.uri, create=False)
        if client.has_collection(kb.collection):
            client.drop_collection(kb.collection)
        store.delete_knowledge_base(kb.id)
    if out.json_mode:
        out.json({"deleted": kb.name})
    else:
        out.text(f"deleted {kb.name} (collection {kb.collection})")
    return 0
