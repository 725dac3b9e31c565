"""Knowledge bases, their members and the users of a service: who may read, edit or own which collection.

A knowledge base is a named Milvus collection with an owner and members, each ``reader``, ``editor`` or ``owner``
(:data:`KB_ROLES`, weakest first). The member :data:`EVERYONE` (``*``) stands for every user of the server: a
knowledge base every user reads has the member ``*`` as ``reader``. A user's role in a knowledge base is the
strongest of their own membership and ``*``'s. Users have a service role, ``member`` or ``admin``
(:data:`USER_ROLES`); an admin acts as owner of every knowledge base.

A mixin of :class:`~._sql.SQLConversationStore`, like :mod:`.accounts`; knowledge-base ids and names are checked here
(:func:`check_kb_name`), roles against their lists, and every error names the value and the accepted ones.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index_convrag.errors import ConfigurationError

from llama_index_convrag.storage.conversation.accounts import EVERYONE, Run, check_user_id

#: A member's role in a knowledge base, weakest first: readers chat, editors also add and remove documents, the
#: owner also renames, shares and deletes it.
KB_ROLES: Tuple[str, ...] = ("reader", "editor", "owner")
#: A user's role in the service: admins manage users and keys and act as owner of every knowledge base.
USER_ROLES: Tuple[str, ...] = ("member", "admin")
KB_NAME = re.compile(r"^[^\W_][\w.-]{0,63}$")
"""A knowledge base's name: a letter or digit of any script, then up to 63 letters, digits, ``_``, ``.`` or ``-``
(it also names the base in model ids and on the command line: no spaces, no ``/``)."""
_KB_COLS = "k.id, k.name, k.collection, k.owner, k.description, k.roots, k.created_at, k.updated_at"


def check_kb_name(name: str) -> str:
    if not isinstance(name, str) or not KB_NAME.match(name):
        raise ConfigurationError(f"knowledge base name {name!r} must match {KB_NAME.pattern} (letters or digits "
                                 "first, then letters, digits, '_', '.' or '-'; 64 characters at most)")
    return name


def check_role(role: str, accepted: Sequence[str] = KB_ROLES) -> str:
    if role not in accepted:
        raise ConfigurationError(f"role must be one of {list(accepted)}, got {role!r}")
    return role


def stronger(a: Optional[str], b: Optional[str]) -> Optional[str]:
    """The stronger of two knowledge-base roles (None: no role)."""
    if a is None or b is None:
        return a if b is None else b
    return a if KB_ROLES.index(a) >= KB_ROLES.index(b) else b


def at_least(role: Optional[str], needed: str) -> bool:
    """Whether ``role`` is ``needed`` or stronger."""
    return role is not None and KB_ROLES.index(role) >= KB_ROLES.index(needed)


@dataclass(frozen=True)
class KnowledgeBase:
    """One knowledge base. ``roots``: the server folders its documents' names are relative to (never shown)."""

    id: str
    name: str
    collection: str
    owner: str
    description: Optional[str]
    roots: Tuple[str, ...]
    created_at: float
    updated_at: float

    def to_dict(self) -> Dict[str, Any]:
        """The public view (no collection, no server folders)."""
        return {"id": self.id, "name": self.name, "description": self.description, "owner": self.owner,
                "created_at": self.created_at, "updated_at": self.updated_at}


@dataclass(frozen=True)
class Member:
    kb_id: str
    user_id: str
    role: str
    created_at: float

    def to_dict(self) -> Dict[str, Any]:
        return {"user_id": self.user_id, "role": self.role, "created_at": self.created_at}


@dataclass(frozen=True)
class User:
    id: str
    role: str
    created_at: float

    def to_dict(self) -> Dict[str, Any]:
        return {"id": self.id, "role": self.role, "created_at": self.created_at}


def _kb(row: Sequence[Any]) -> KnowledgeBase:
    return KnowledgeBase(id=row[0], name=row[1], collection=row[2], owner=row[3], description=row[4],
                         roots=tuple(json.loads(row[5])), created_at=float(row[6]), updated_at=float(row[7]))


class KnowledgeMixin:
    """Knowledge bases, members and users over the ``_tx`` transactions of a SQL store."""

    @abstractmethod
    def _tx(self, write: bool = True) -> "AbstractContextManager[Run]":
        """A transaction yielding ``run(sql, params) -> rows``."""

    # --- knowledge bases -----------------------------------------------------------------------
    def create_knowledge_base(self, name: str, owner: str, *, collection: Optional[str] = None,
                              description: Optional[str] = None, roots: Sequence[str] = (),
                              readers: Sequence[str] = ()) -> KnowledgeBase:
        """A new knowledge base owned by ``owner`` (its first member, as ``owner``), with ``readers`` as readers.
        ``collection``: its Milvus collection (default ``kb_<id>``). ConfigurationError when the name or the
        collection is taken."""
        check_kb_name(name)
        check_user_id(owner)
        kb_id = secrets.token_hex(8)
        now = time.time()
        kb = KnowledgeBase(id=kb_id, name=name, collection=collection if collection is not None else f"kb_{kb_id}",
                           owner=owner, description=description, roots=tuple(roots), created_at=now, updated_at=now)
        with self._tx() as run:
            taken = run("SELECT name, collection FROM convrag_kbs WHERE name = :n OR collection = :c",
                        {"n": name, "c": kb.collection})
            if taken:
                what = "name" if taken[0][0] == name else "collection"
                raise ConfigurationError(f"a knowledge base with the {what} "
                                         f"{name if what == 'name' else kb.collection!r} exists; choose another")
            run("INSERT INTO convrag_kbs (id, name, collection, owner, description, roots, created_at, updated_at) "
                "VALUES (:i, :n, :c, :o, :d, :r, :t, :t)", {"i": kb_id, "n": name, "c": kb.collection, "o": owner,
                                                          "d": description, "r": json.dumps(list(roots)), "t": now})
            for user, role in [(owner, "owner"), *((r, "reader") for r in readers if r != owner)]:
                run("INSERT INTO convrag_kb_members (kb_id, user_id, role, created_at) VALUES (:k, :u, :r, :t)",
                    {"k": kb_id, "u": check_user_id(user, everyone=True), "r": role, "t": now})
        return kb

    def knowledge_base(self, kb_id: str) -> Optional[KnowledgeBase]:
        return self._one_kb("k.id = :v", kb_id)

    def knowledge_base_named(self, name: str) -> Optional[KnowledgeBase]:
        return self._one_kb("k.name = :v", name)

    def knowledge_base_of_collection(self, collection: str) -> Optional[KnowledgeBase]:
        return self._one_kb("k.collection = :v", collection)

    def _one_kb(self, where: str, value: str) -> Optional[KnowledgeBase]:
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_KB_COLS} FROM convrag_kbs k WHERE {where}", {"v": value})
        return _kb(rows[0]) if rows else None

    def list_knowledge_bases(self) -> List[KnowledgeBase]:
        """Every knowledge base, by name."""
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_KB_COLS} FROM convrag_kbs k ORDER BY k.name")
        return [_kb(r) for r in rows]

    def knowledge_bases_of(self, user_id: str) -> List[Tuple[KnowledgeBase, str]]:
        """The knowledge bases ``user_id`` has a role in (theirs or everyone's), by name, with that role."""
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_KB_COLS}, m.role FROM convrag_kbs k JOIN convrag_kb_members m ON m.kb_id = k.id "
                       "WHERE m.user_id IN (:u, :e) ORDER BY k.name", {"u": user_id, "e": EVERYONE})
        out: Dict[str, Tuple[KnowledgeBase, str]] = {}
        for r in rows:
            kb, role = _kb(r[:8]), r[8]
            held = out.get(kb.id)
            out[kb.id] = (kb, role if held is None else str(stronger(held[1], role)))
        return list(out.values())

    def knowledge_base_with_role(self, kb_id: str, user_id: str) -> Tuple[Optional[KnowledgeBase], Optional[str]]:
        """The knowledge base (None when absent) and ``user_id``'s role in it (as :meth:`role_in`): one query."""
        with self._tx(write=False) as run:
            rows = run(f"SELECT {_KB_COLS}, m.role FROM convrag_kbs k LEFT JOIN convrag_kb_members m ON "
                       "m.kb_id = k.id AND m.user_id IN (:u, :e) WHERE k.id = :k", {"k": kb_id, "u": user_id,
                                                                                   "e": EVERYONE})
        if not rows:
            return None, None
        role: Optional[str] = None
        for r in rows:
            role = stronger(role, r[8])
        return _kb(rows[0][:8]), role

    def role_in(self, kb_id: str, user_id: str) -> Optional[str]:
        """``user_id``'s role in the knowledge base (their own or everyone's, the stronger), None when they have
        none (or it does not exist)."""
        with self._tx(write=False) as run:
            rows = run("SELECT role FROM convrag_kb_members WHERE kb_id = :k AND user_id IN (:u, :e)",
                       {"k": kb_id, "u": user_id, "e": EVERYONE})
        role: Optional[str] = None
        for (held,) in rows:
            role = stronger(role, held)
        return role

    def update_knowledge_base(self, kb_id: str, *, name: Optional[str] = None, description: Optional[str] = None,
                              roots: Optional[Sequence[str]] = None) -> Optional[KnowledgeBase]:
        """Rename it, describe it or set its folders (the arguments given); the updated base, None when absent."""
        sets: Dict[str, Any] = {}
        if name is not None:
            sets["name"] = check_kb_name(name)
        if description is not None:
            sets["description"] = description
        if roots is not None:
            sets["roots"] = json.dumps(list(roots))
        with self._tx() as run:
            if name is not None and run("SELECT 1 FROM convrag_kbs WHERE name = :n AND id != :i",
                                        {"n": name, "i": kb_id}):
                raise ConfigurationError(f"a knowledge base with the name {name!r} exists; choose another")
            if sets:
                assignments = ", ".join(f"{col} = :{col}" for col in sets)
                run(f"UPDATE convrag_kbs SET {assignments}, updated_at = :t WHERE id = :i",
                    {**sets, "t": time.time(), "i": kb_id})
        return self.knowledge_base(kb_id)

    def delete_knowledge_base(self, kb_id: str) -> bool:
        """Remove the knowledge base and its members (conversations bound to it keep their messages); False when
        absent. Its collection is the caller's to drop."""
        with self._tx() as run:
            run("DELETE FROM convrag_kb_members WHERE kb_id = :k", {"k": kb_id})
            return bool(run("DELETE FROM convrag_kbs WHERE id = :k RETURNING id", {"k": kb_id}))

    # --- members ---------------------------------------------------------------------------------
    def set_member(self, kb_id: str, user_id: str, role: str) -> Member:
        """Give ``user_id`` (or ``*``) ``role`` (``reader`` or ``editor``; the owner stays the owner)."""
        check_user_id(user_id, everyone=True)
        check_role(role, KB_ROLES[:2])
        member = Member(kb_id=kb_id, user_id=user_id, role=role, created_at=time.time())
        with self._tx() as run:
            owner = run("SELECT owner FROM convrag_kbs WHERE id = :k", {"k": kb_id})
            if not owner:
                raise ConfigurationError(f"no knowledge base with id {kb_id!r}")
            if owner[0][0] == user_id:
                raise ConfigurationError(f"{user_id!r} owns this knowledge base; the owner's role does not change")
            run("DELETE FROM convrag_kb_members WHERE kb_id = :k AND user_id = :u", {"k": kb_id, "u": user_id})
            run("INSERT INTO convrag_kb_members (kb_id, user_id, role, created_at) VALUES (:k, :u, :r, :t)",
                {"k": kb_id, "u": user_id, "r": role, "t": member.created_at})
        return member

    def remove_member(self, kb_id: str, user_id: str) -> bool:
        """Remove a member (never the owner); False when ``user_id`` was not one."""
        with self._tx() as run:
            return bool(run("DELETE FROM convrag_kb_members WHERE kb_id = :k AND user_id = :u AND role != 'owner' "
                            "RETURNING user_id", {"k": kb_id, "u": user_id}))

    def members(self, kb_id: str) -> List[Member]:
        with self._tx(write=False) as run:
            rows = run("SELECT kb_id, user_id, role, created_at FROM convrag_kb_members WHERE kb_id = :k "
                       "ORDER BY created_at, user_id", {"k": kb_id})
        return [Member(kb_id=r[0], user_id=r[1], role=r[2], created_at=float(r[3])) for r in rows]

    # --- users -----------------------------------------------------------------------------------
    def ensure_user(self, user_id: str, role: Optional[str] = None) -> User:
        """The user (created as ``member`` when new); ``role`` given: set to it."""
        check_user_id(user_id)
        if role is not None:
            check_role(role, USER_ROLES)
        now = time.time()
        with self._tx() as run:
            run("INSERT INTO convrag_users (id, role, created_at) VALUES (:u, :r, :t) ON CONFLICT (id) DO NOTHING",
                {"u": user_id, "r": role if role is not None else "member", "t": now})
            if role is not None:
                run("UPDATE convrag_users SET role = :r WHERE id = :u", {"u": user_id, "r": role})
            row = run("SELECT id, role, created_at FROM convrag_users WHERE id = :u", {"u": user_id})[0]
        return User(id=row[0], role=row[1], created_at=float(row[2]))

    def user(self, user_id: str) -> Optional[User]:
        with self._tx(write=False) as run:
            rows = run("SELECT id, role, created_at FROM convrag_users WHERE id = :u", {"u": user_id})
        return User(id=rows[0][0], role=rows[0][1], created_at=float(rows[0][2])) if rows else None

    def list_users(self) -> List[User]:
        with self._tx(write=False) as run:
            rows = run("SELECT id, role, created_at FROM convrag_users ORDER BY id")
        return [User(id=r[0], role=r[1], created_at=float(r[2])) for r in rows]
