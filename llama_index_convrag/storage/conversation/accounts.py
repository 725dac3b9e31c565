"""What a multi-user service stores beside messages: conversations with an owner, a title and a knowledge base, API
keys with scopes (only their SHA-256 is stored), and feedback on answers.

A mixin of :class:`~._sql.SQLConversationStore` (SQLite and PostgreSQL alike); every read that a user makes names
the owner, so another user's id reads as absent.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from llama_index_convrag.errors import ConfigurationError

Run = Callable[..., List[tuple]]
KEY_PREFIX = "ck_"
RATINGS = ("up", "down")
#: What a key may do: ``chat`` (read and hold conversations, read the knowledge bases one may read), ``edit`` (make
#: knowledge bases; add and remove documents, share and rename where one's role allows), ``admin`` (users and keys;
#: only for an admin user).
SCOPES: Tuple[str, ...] = ("chat", "edit", "admin")
DEFAULT_SCOPES: Tuple[str, ...] = ("chat", "edit")
#: The member of a knowledge base that stands for every user of the server.
EVERYONE = "*"
USER_NAME = re.compile(r"^[^\s/*][^\s/]{0,127}$")
"""A user id: 1 to 128 characters without spaces or ``/``, not starting with ``*`` (that is :data:`EVERYONE`)."""


def check_user_id(user_id: str, everyone: bool = False) -> str:
    """``user_id`` (``*`` too when ``everyone``), else ConfigurationError naming the rule."""
    if everyone and user_id == EVERYONE:
        return user_id
    if not isinstance(user_id, str) or not USER_NAME.match(user_id):
        raise ConfigurationError(f"user id {user_id!r} must be 1 to 128 characters without spaces or '/', not "
                                 f"starting with '*'{' (or * for every user)' if everyone else ''}")
    return user_id


def check_scopes(scopes: Sequence[str]) -> Tuple[str, ...]:
    """The scopes in :data:`SCOPES` order, or ConfigurationError naming the unknown ones and the accepted."""
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown or not scopes:
        raise ConfigurationError(f"scopes must be a non-empty subset of {list(SCOPES)}, got {list(scopes)!r}")
    return tuple(s for s in SCOPES if s in scopes)


@dataclass
class ConversationInfo:
    id: str
    owner: str
    title: Optional[str]
    created_at: float
    updated_at: float
    message_count: int = 0
    #: the knowledge base it answers from (None: written without one, e.g. by ``convrag chat``: the server's default)
    kb_id: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("owner", "kb_id")}


@dataclass
class ApiKey:
    id: str
    user_id: str
    prefix: str
    created_at: float
    revoked_at: Optional[float] = None
    scopes: Tuple[str, ...] = DEFAULT_SCOPES

    def to_dict(self) -> Dict[str, Any]:
        return {**asdict(self), "scopes": list(self.scopes)}


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the user, the scopes of the key it sent (every scope without keys), whether the user
    is an admin, and the key's id (None without a key)."""

    user_id: str
    scopes: Tuple[str, ...]
    admin: bool = False
    key_id: Optional[str] = None

    def can(self, scope: str) -> bool:
        """Whether the key has ``scope`` (``admin`` also needs an admin user)."""
        return scope in self.scopes and (scope != "admin" or self.admin)


@dataclass
class Feedback:
    message_id: str
    rating: str
    text: Optional[str]
    created_at: float

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def hash_key(secret: str) -> str:
    """The stored form of an API key (keys are 256-bit random, so one SHA-256 round is enough)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def in_params(column: str, values: Sequence[str], chunk: int = 500) -> Iterator[Tuple[str, Dict[str, str]]]:
    """``(column IN (:v0, ...), params)`` per chunk of ``values`` (bound parameters, SQLite and PostgreSQL)."""
    for start in range(0, len(values), chunk):
        params = {f"v{i}": v for i, v in enumerate(values[start:start + chunk])}
        yield f"{column} IN ({', '.join(':' + k for k in params)})", params


def encode_cursor(created_at: float, ident: str) -> str:
    return base64.urlsafe_b64encode(f"{created_at!r}|{ident}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> Tuple[float, str]:
    """``(created_at, id)`` of a page cursor; ConfigurationError naming it when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, ident = raw.split("|", 1)
        return float(stamp), ident
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigurationError(f"cursor {cursor!r} is not a page cursor this server handed out") from e


_CONV_COLS = ("c.id, c.owner, c.title, c.created_at, c.updated_at, "
              "(SELECT COUNT(*) FROM convrag_messages m WHERE m.conversation_id = c.id), c.kb_id")


def _info(row: tuple) -> ConversationInfo:
    return ConversationInfo(id=row[0], owner=row[1], title=row[2], created_at=float(row[3]),
                            updated_at=float(row[4]), message_count=int(row[5]), kb_id=row[6])


class AccountsMixin:
    """Owners, titles, keys, feedback and turn claims over the ``_tx`` transactions of a SQL store."""

    @abstractmethod
    def _tx(self, write: bool = True) -> "AbstractContextManager[Run]":
        """A transaction yielding ``run(sql, params) -> rows``."""

    # --- conversations -------------------------------------------------------------------------
    def create_conversation(self, owner: str, title: Optional[str] = None,
                            conversation_id: Optional[str] = None, kb_id: Optional[str] = None) -> ConversationInfo:
        now = time.time()
        cid = conversation_id if conversation_id is not None else secrets.token_hex(16)
        with self._tx() as run:
            run("INSERT INTO convrag_conversations (id, owner, title, created_at, updated_at, kb_id) "
                "VALUES (:c, :o, :t, :n, :n, :k)", {"c": cid, "o": owner, "t": title, "n": now, "k": kb_id})
        return ConversationInfo(id=cid, owner=owner, title=title, created_at=now, updated_at=now, kb_id=kb_id)

    def conversation_info(self, conversation_id: str, owner: Optional[str] = None) -> Optional[ConversationInfo]:
        """The conversation, or None when absent or (``owner`` given) owned by someone else."""
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_CONV_COLS} FROM convrag_conversations c WHERE c.id = :c", {"c": conversation_id})
        if not rows or (owner is not None and rows[0][1] != owner):
            return None
        return _info(rows[0])

    def list_owned(self, owner: str, limit: int, cursor: Optional[str] = None
                   ) -> Tuple[List[ConversationInfo], Optional[str]]:
        """A page of ``owner``'s conversations, newest first, and the cursor of the next page (None: the last)."""
        if limit < 1:
            raise ConfigurationError(f"limit must be >= 1, got {limit!r}")
        params: Dict[str, Any] = {"o": owner, "n": limit + 1}
        where = "c.owner = :o"
        if cursor is not None:
            params["t"], params["i"] = decode_cursor(cursor)
            where += " AND (c.created_at < :t OR (c.created_at = :t AND c.id < :i))"
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_CONV_COLS} FROM convrag_conversations c WHERE {where} "
                       "ORDER BY c.created_at DESC, c.id DESC LIMIT :n", params)
        page = [_info(r) for r in rows[:limit]]
        more = len(rows) > limit
        return page, (encode_cursor(page[-1].created_at, page[-1].id) if more and page else None)

    def rename_conversation(self, conversation_id: str, title: Optional[str]) -> None:
        with self._tx() as run:
            run("UPDATE convrag_conversations SET title = :t, updated_at = :n WHERE id = :c",
                {"t": title, "n": time.time(), "c": conversation_id})

    # --- API keys ------------------------------------------------------------------------------
    def create_key(self, user_id: str, scopes: Sequence[str] = DEFAULT_SCOPES) -> Tuple[ApiKey, str]:
        """A new key for ``user_id`` (the user is created, as a member, when new): its record and the secret (shown
        once; only the hash is stored). The ``admin`` scope needs an admin user."""
        if not user_id or not user_id.strip():
            raise ConfigurationError(f"user_id must be a non-empty name, got {user_id!r}")
        check_user_id(user_id)
        scopes = check_scopes(scopes)
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(id=secrets.token_hex(8), user_id=user_id, prefix=secret[:10], created_at=time.time(),
                     scopes=scopes)
        with self._tx() as run:
            run("INSERT INTO convrag_users (id, role, created_at) VALUES (:u, 'member', :t) ON CONFLICT (id) "
                "DO NOTHING", {"u": user_id, "t": key.created_at})
            role = run("SELECT role FROM convrag_users WHERE id = :u", {"u": user_id})[0][0]
            if "admin" in scopes and role != "admin":
                raise ConfigurationError(f"the admin scope needs an admin user; {user_id!r} is a {role} (make them "
                                         "an admin first: 'convrag users set-role USER admin')")
            run("INSERT INTO convrag_keys (id, user_id, key_hash, prefix, created_at, scopes) "
                "VALUES (:i, :u, :h, :p, :t, :s)", {"i": key.id, "u": user_id, "h": hash_key(secret),
                                                    "p": key.prefix, "t": key.created_at, "s": ",".join(scopes)})
        return key, secret

    def list_keys(self, user_id: Optional[str] = None) -> List[ApiKey]:
        """Every key (of ``user_id`` when given), oldest first."""
        where, params = ("WHERE user_id = :u", {"u": user_id}) if user_id is not None else ("", {})
        with self._tx(write=False) as run:
            rows = run(f"SELECT id, user_id, prefix, created_at, revoked_at, scopes FROM convrag_keys {where} "
                       "ORDER BY created_at", params)
        return [ApiKey(id=r[0], user_id=r[1], prefix=r[2], created_at=float(r[3]),
                       revoked_at=None if r[4] is None else float(r[4]), scopes=tuple(r[5].split(",")))
                for r in rows]

    def principal_for_key(self, secret: str) -> Optional[Principal]:
        """Who an active key acts as (its user, scopes and whether the user is an admin), or None (unknown or
        revoked): one query."""
        with self._tx(write=False) as run:
            rows = run("SELECT k.user_id, k.scopes, u.role, k.id FROM convrag_keys k LEFT JOIN convrag_users u ON "
                       "u.id = k.user_id WHERE k.key_hash = :h AND k.revoked_at IS NULL", {"h": hash_key(secret)})
        if not rows:
            return None
        user_id, scopes, role, key_id = rows[0]
        return Principal(user_id=user_id, scopes=tuple(scopes.split(",")), admin=role == "admin", key_id=key_id)

    def revoke_key(self, key_id: str) -> bool:
        """Revoke a key by id; False when no active key has that id."""
        with self._tx() as run:
            rows = run("UPDATE convrag_keys SET revoked_at = :t WHERE id = :i AND revoked_at IS NULL RETURNING id",
                       {"t": time.time(), "i": key_id})
        return bool(rows)

    def user_for_key(self, secret: str) -> Optional[str]:
        """The user of an active key, or None (unknown or revoked)."""
        with self._tx(write=False) as run:
            rows = run("SELECT user_id FROM convrag_keys WHERE key_hash = :h AND revoked_at IS NULL",
                       {"h": hash_key(secret)})
        return rows[0][0] if rows else None

    def has_active_keys(self) -> bool:
        with self._tx(write=False) as run:
            return bool(run("SELECT 1 FROM convrag_keys WHERE revoked_at IS NULL LIMIT 1"))

    # --- feedback ------------------------------------------------------------------------------
    def put_feedback(self, message_id: str, user_id: str, rating: str, text: Optional[str]) -> Feedback:
        """Set ``user_id``'s feedback on one message (replacing theirs)."""
        if rating not in RATINGS:
            raise ConfigurationError(f"rating must be one of {list(RATINGS)}, got {rating!r}")
        fb = Feedback(message_id=message_id, rating=rating, text=text, created_at=time.time())
        with self._tx() as run:
            run("DELETE FROM convrag_feedback WHERE message_id = :m AND user_id = :u", {"m": message_id, "u": user_id})
            run("INSERT INTO convrag_feedback (message_id, user_id, rating, text, created_at) "
                "VALUES (:m, :u, :r, :x, :t)", {"m": message_id, "u": user_id, "r": rating, "x": text,
                                                 "t": fb.created_at})
        return fb

    def get_feedback_of(self, message_ids: Sequence[str], user_id: str) -> Dict[str, Feedback]:
        """``user_id``'s feedback on each of ``message_ids`` that has one (one query per chunk of ids)."""
        out: Dict[str, Feedback] = {}
        for where, params in in_params("message_id", message_ids):
            with self._tx(write=False) as run:
                rows = run(f"SELECT message_id, rating, text, created_at FROM convrag_feedback WHERE {where} AND "
                           "user_id = :u", {**params, "u": user_id})
            out.update({r[0]: Feedback(message_id=r[0], rating=r[1], text=r[2], created_at=float(r[3])) for r in rows})
        return out

    def get_feedback(self, message_id: str, user_id: str) -> Optional[Feedback]:
        with self._tx(write=False) as run:
            rows = run("SELECT rating, text, created_at FROM convrag_feedback WHERE message_id = :m AND "
                       "user_id = :u", {"m": message_id, "u": user_id})
        return Feedback(message_id=message_id, rating=rows[0][0], text=rows[0][1],
                        created_at=float(rows[0][2])) if rows else None
