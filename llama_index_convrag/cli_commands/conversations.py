"""``convrag conversations list`` and ``convrag conversations export``: the conversations ``ask`` and ``chat`` stored.

The store is ``convrag_chats.db`` next to the Milvus Lite file (``--store`` to name another); these commands never
create it and open no Milvus connection. ``ask``/``chat --conversation ID`` resume one of the listed conversations.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Dict, List

from llama_index_convrag.cli_commands.common import EXIT_INPUT, EXIT_USAGE, CLIError, Output, default_store_path

EXPORT_FORMATS = ("json", "markdown")
PREVIEW_CHARS = 80


def store_path(uri: Any, store: Any) -> Path:
    """``--store``, else the default store beside the Milvus file of ``--uri`` / ``CONVRAG_MILVUS_URI``."""
    from llama_index_convrag.milvus.client import resolve_milvus

    if store is not None:
        return Path(store)
    try:
        return default_store_path(resolve_milvus(uri))
    except ValueError as exc:
        raise CLIError(EXIT_USAGE, str(exc)) from exc


def open_store(path: Path) -> Any:
    """The existing conversation store at ``path``; exit 3 when there is none (nothing is created)."""
    from llama_index_convrag.storage.conversation import SQLiteConversationStore

    if not path.is_file():
        raise CLIError(EXIT_INPUT, f"no conversation store at {str(path)!r}: 'convrag ask' and 'convrag chat' "
                                   f"create it (or pass --store PATH)")
    return SQLiteConversationStore(path)


def require_conversation(store: Any, conversation_id: str, path: Path) -> None:
    """Exit 3 when ``conversation_id`` is not in ``store``."""
    if conversation_id not in store.list_conversations():
        raise CLIError(EXIT_INPUT, f"no conversation {conversation_id!r} in {str(path)!r}; see "
                                   f"'convrag conversations list'")


def _when(timestamp: float) -> str:
    return _dt.datetime.fromtimestamp(timestamp, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def summary(store: Any, conversation_id: str) -> Dict[str, Any]:
    """Id, number of questions, first question, and the time of the last message of one conversation."""
    messages = store.get_conversation(conversation_id)
    questions = [m for m in messages if m.role == "user"]
    first = " ".join(questions[0].content.split()) if questions else ""
    return {"conversation_id": conversation_id, "questions": len(questions),
            "first_question": first[:PREVIEW_CHARS] + ("..." if len(first) > PREVIEW_CHARS else ""),
            "updated": _when(max(m.updated_at for m in messages)) if messages else None}


def export(store: Any, conversation_id: str) -> Dict[str, Any]:
    """Every message (status, error, citations) and every turn record of one conversation."""
    messages: List[Dict[str, Any]] = []
    for m in store.get_conversation(conversation_id):
        messages.append({"id": m.id, "role": m.role, "content": m.content, "status": m.status, "error": m.error,
                         "created": _when(m.created_at),
                         "citations": [c.to_dict() for c in store.get_citations(m.id)] if m.role == "assistant"
                         else []})
    return {"conversation_id": conversation_id, "messages": messages,
            "turns": store.list_turn_records(conversation_id)}


def to_markdown(data: Dict[str, Any]) -> str:
    lines = [f"# Conversation {data['conversation_id']}", ""]
    for m in data["messages"]:
        status = "" if m["status"] == "complete" else f" ({m['status']}{': ' + m['error'] if m['error'] else ''})"
        lines += [f"## {m['role']}{status}", "", m["content"] or "_(empty)_", ""]
        cited = [c for c in m["citations"] if c["marker"] is not None]
        if cited:
            lines += [f"- [{c['marker']}] {c['ref_doc_id'] or c['node_id']}" for c in cited] + [""]
    return "\n".join(lines)


def cmd_conversations_list(args: Any, out: Output) -> int:
    path = store_path(args.uri, args.store)
    store = open_store(path)
    rows = [summary(store, cid) for cid in store.list_conversations()]
    if out.json_mode:
        out.json({"store": str(path), "conversations": rows})
        return 0
    for r in rows:
        out.text(f"{r['conversation_id']}\t{r['questions']} question(s)\t{r['updated']}\t{r['first_question']}")
    out.note(f"{len(rows)} conversation(s) in {str(path)!r}; resume one with 'convrag chat --conversation ID', "
             f"export it with 'convrag conversations export ID'")
    return 0


def cmd_conversations_export(args: Any, out: Output) -> int:
    path = store_path(args.uri, args.store)
    store = open_store(path)
    require_conversation(store, args.conversation_id, path)
    data = export(store, args.conversation_id)
    if out.json_mode or args.format == "json":
        out.json(data)
    else:
        out.text(to_markdown(data), end="")
    return 0
