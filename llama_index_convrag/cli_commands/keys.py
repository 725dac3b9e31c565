"""``convrag keys create | list | revoke`` and ``convrag users list | set-role``: the API keys of ``convrag serve``
(kept in its conversation store; only each key's SHA-256 is stored, the key itself is printed once) and its users'
roles."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from llama_index_convrag.cli_commands.common import EXIT_INPUT, EXIT_USAGE, CLIError, Output
from llama_index_convrag.cli_commands.conversations import store_path
from llama_index_convrag.storage.conversation.accounts import DEFAULT_SCOPES


def open_serve_store(spec: Any, uri: Any) -> Any:
    """The store named by ``--store`` (a SQLite path or a ``postgresql+psycopg://`` URL), else the default SQLite
    file beside the Milvus file of ``--uri`` (created if missing: keys may come before the first chat)."""
    from llama_index_convrag.storage.conversation import SQLiteConversationStore
    from llama_index_convrag.storage.conversation.postgres import PostgresConversationStore

    if spec is not None and str(spec).startswith("postgresql"):
        try:
            return PostgresConversationStore(str(spec))
        except ValueError as exc:
            raise CLIError(EXIT_USAGE, str(exc)) from exc
    return SQLiteConversationStore(store_path(uri, spec))


def _when(stamp: Any) -> str:
    return "-" if stamp is None else _dt.datetime.fromtimestamp(stamp, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%MZ")


def cmd_keys_create(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        try:
            key, secret = store.create_key(args.user, args.scope if args.scope else DEFAULT_SCOPES)
        except ValueError as exc:
            raise CLIError(EXIT_USAGE, str(exc)) from exc
    if out.json_mode:
        out.json({**key.to_dict(), "key": secret})
    else:
        out.text(secret)
        out.note(f"key {key.id} for user {key.user_id!r} (scopes: {', '.join(key.scopes)}): shown once, only its "
                 "hash is stored; send it as 'Authorization: Bearer <key>'")
    return 0


def cmd_keys_list(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        keys = store.list_keys()
    if out.json_mode:
        out.json({"keys": [k.to_dict() for k in keys]})
        return 0
    for k in keys:
        state = "active" if k.revoked_at is None else f"revoked {_when(k.revoked_at)}"
        out.text(f"{k.id}\t{k.user_id}\t{k.prefix}...\t{','.join(k.scopes)}\tcreated {_when(k.created_at)}\t{state}")
    out.note(f"{len(keys)} keys, {sum(k.revoked_at is None for k in keys)} active")
    return 0


def cmd_keys_revoke(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        done = store.revoke_key(args.key_id)
    if not done:
        raise CLIError(EXIT_INPUT, f"no active key with id {args.key_id!r}; see 'convrag keys list'")
    if out.json_mode:
        out.json({"revoked": args.key_id})
    else:
        out.text(f"revoked {args.key_id}")
    return 0


def cmd_users_list(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        users = store.list_users()
    if out.json_mode:
        out.json({"users": [u.to_dict() for u in users]})
        return 0
    for u in users:
        out.text(f"{u.id}\t{u.role}\tsince {_when(u.created_at)}")
    out.note(f"{len(users)} users, {sum(u.role == 'admin' for u in users)} admin")
    return 0


def cmd_users_set_role(args: Any, out: Output) -> int:
    with open_serve_store(args.store, args.uri) as store:
        try:
            user = store.ensure_user(args.user, role=args.role)
        except ValueError as exc:
            raise CLIError(EXIT_USAGE, str(exc)) from exc
    if out.json_mode:
        out.json(user.to_dict())
    else:
        out.text(f"{user.id}\t{user.role}")
    return 0
