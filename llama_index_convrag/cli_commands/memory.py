"""``convrag memory show | edit | clear | facts | forget``: what the chat memory keeps in a conversation store.

A conversation's running summary (every version, a user's edit as a new one, clearing every version) and a user's
facts (listed with the message each came from, deleted one by one or all). Every command acts for one user
(``--user``, default ``local``: the owner of what ``ask``, ``chat`` and the engine alone write), and another
user's conversation or fact reads as absent. The store is never created, and no Milvus connection is opened (a
conversation's recalled messages go with the conversation: ``convrag serve``'s DELETE or the engine's
``delete_conversation``).
"""

from __future__ import annotations

import datetime as _dt
import sys
from typing import Any, Callable, List

from llama_index_convrag.cli_commands.common import EXIT_INPUT, EXIT_USAGE, CLIError, Output
from llama_index_convrag.cli_commands.conversations import open_store, store_path

DEFAULT_USER = "local"


def _when(stamp: float) -> str:
    return _dt.datetime.fromtimestamp(stamp, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _memory(args: Any) -> Any:
    """The user's view of the memory rows in the store ``--store`` / ``--uri`` names (summary cap: ``--max-tokens``
    where given)."""
    from llama_index_convrag.cli_commands.keys import open_serve_store
    from llama_index_convrag.memory import ConversationMemory, EpisodicOptions, MemoryOptions, SummaryOptions

    spec = args.store
    store = open_serve_store(spec, args.uri) if spec is not None and str(spec).startswith("postgresql") \
        else open_store(store_path(args.uri, spec))
    cap = getattr(args, "max_tokens", None)
    summary = SummaryOptions() if cap is None else SummaryOptions(max_tokens=cap)
    return ConversationMemory.from_defaults(MemoryOptions(episodic=EpisodicOptions(enabled=False), summary=summary),
                                            store=store)


def _on_conversation(args: Any, act: Callable[[Any], Any]) -> Any:
    """``act(memory)`` on the user's conversation ``args.conversation_id`` (exit 3 when it is not theirs)."""
    memory = _memory(args)
    try:
        if memory.store.conversation_info(args.conversation_id, owner=args.user) is None:
            raise CLIError(EXIT_INPUT, f"no conversation {args.conversation_id!r} of user {args.user!r}; see "
                                       f"'convrag conversations list'")
        return act(memory)
    finally:
        memory.store.close()


def cmd_memory_show(args: Any, out: Output) -> int:
    versions = _on_conversation(args, lambda m: m.summary_versions(args.user, args.conversation_id))
    shown = versions if args.versions else versions[-1:]
    if out.json_mode:
        out.json({"conversation_id": args.conversation_id, "user": args.user,
                  "summary": [v.to_dict() for v in shown]})
        return 0
    for v in shown:
        out.text(f"# version {v.version} ({v.source}, {v.tokens} tokens, {v.covered} messages, {_when(v.created_at)})")
        out.text(v.text)
    if not versions:
        out.note(f"conversation {args.conversation_id!r} has no summary yet (one is written when messages leave "
                 f"the recent window of a chat with memory on)")
    return 0


def cmd_memory_edit(args: Any, out: Output) -> int:
    from llama_index_convrag.errors import ConfigurationError

    text = sys.stdin.read() if args.text == "-" else args.text
    if not text.strip():
        raise CLIError(EXIT_USAGE, "the summary text is blank; to remove the summary use 'convrag memory clear ID'")
    try:
        version = _on_conversation(args, lambda m: m.edit_summary(args.user, args.conversation_id, text.strip()))
    except ConfigurationError as exc:
        raise CLIError(EXIT_USAGE, f"{exc} (--max-tokens)") from exc
    if out.json_mode:
        out.json(version.to_dict())
    else:
        out.text(f"summary version {version.version} of {args.conversation_id} ({version.tokens} tokens)")
    return 0


def cmd_memory_clear(args: Any, out: Output) -> int:
    cleared = _on_conversation(args, lambda m: m.clear_summary(args.user, args.conversation_id))
    if out.json_mode:
        out.json({"conversation_id": args.conversation_id, "cleared_versions": cleared})
    else:
        out.text(f"cleared {cleared} summary version(s) of {args.conversation_id}")
    return 0


def cmd_memory_facts(args: Any, out: Output) -> int:
    memory = _memory(args)
    try:
        facts = memory.facts(args.user, include_history=args.history)
    finally:
        memory.store.close()
    if out.json_mode:
        out.json({"user": args.user, "facts": [f.to_dict() for f in facts]})
        return 0
    for f in facts:
        state = "" if f.status == "active" else f"\t({f.status})"
        out.text(f"{f.id}\t{f.text}\tfrom message {f.source_message_id or '-'}{state}")
    out.note(f"{sum(f.status == 'active' for f in facts)} fact(s) of user {args.user!r}")
    return 0


def cmd_memory_forget(args: Any, out: Output) -> int:
    if bool(args.fact_ids) == bool(args.all):
        raise CLIError(EXIT_USAGE, "name the facts to forget (FACT_ID ...; see 'convrag memory facts') or pass "
                                   "--all, not both")
    memory = _memory(args)
    missing: List[str] = []
    try:
        if args.all:
            deleted = memory.forget_facts(args.user)
        else:
            missing = [i for i in args.fact_ids if not memory.delete_fact(args.user, i)]
            deleted = len(args.fact_ids) - len(missing)
    finally:
        memory.store.close()
    if missing:
        raise CLIError(EXIT_INPUT, f"no fact {', '.join(repr(i) for i in missing)} of user {args.user!r} "
                                   f"({deleted} deleted); see 'convrag memory facts'")
    if out.json_mode:
        out.json({"user": args.user, "deleted": deleted})
    else:
        out.text(f"deleted {deleted} fact(s) of user {args.user!r}")
    return 0
