"""PostgreSQL (or any SQLAlchemy URL with the same SQL) conversation store for deployments beyond one machine.

Needs the ``postgres`` extra (SQLAlchemy 2 + psycopg 3). Tables are prefixed ``convrag_`` so the database may be
shared with other applications; migrations take a transaction-scoped advisory lock so concurrent openers serialise.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, List, Optional

from llama_index.core.bridge.pydantic import Field, PrivateAttr

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.storage.conversation._sql import Run, SQLConversationStore
from llama_index_convrag.storage.conversation.base import ConversationStoreError

_MIGRATION_LOCK = 0x636F6E76  # "conv"


def _render_url(url: str) -> str:
    """The URL without its password, for error messages."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # pragma: no cover - malformed URL; SQLAlchemy raises its own error later
        return "<unparsable url>"


class PostgresConversationStore(SQLConversationStore):
    """Conversations in PostgreSQL through a SQLAlchemy URL such as ``postgresql+psycopg://user@host/db``."""

    url: str = Field(description="SQLAlchemy database URL.")
    pool_size: int = Field(default=5, description="Connection pool size.")

    _engine: Any = PrivateAttr(default=None)

    def __init__(self, url: str, pool_size: int = 5) -> None:
        if not url.startswith("postgresql"):
            raise ConfigurationError(f"url must be a postgresql SQLAlchemy URL (postgresql+psycopg://...), got {_render_url(url)!r}")
        if pool_size < 1:
            raise ConfigurationError(f"pool_size must be >= 1, got {pool_size!r}")
        super().__init__(url=url, pool_size=pool_size)
        self._types = {"AUTO": "BIGSERIAL PRIMARY KEY", "FLOAT": "DOUBLE PRECISION"}

    @classmethod
    def class_name(cls) -> str:
        return "PostgresConversationStore"

    def _describe(self) -> str:
        return f"PostgreSQL database {_render_url(self.url)!r}"

    def _connect(self) -> None:
        try:
            from sqlalchemy import create_engine, text
        except ImportError as e:  # pragma: no cover - extra not installed
            raise ImportError("PostgresConversationStore needs: pip install 'llama-index-convrag[postgres]'") from e
        engine = create_engine(self.url, pool_size=self.pool_size, pool_pre_ping=True)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as e:
            engine.dispose()
            raise ConversationStoreError(f"cannot connect to {self._describe()}: {e}") from e
        self._engine = engine

    def _has_meta(self, run: Run) -> bool:
        return bool(run("SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() "
                        "AND table_name = 'convrag_meta'"))

    @contextmanager
    def _transaction(self, *, migrate: bool = False, write: bool = True) -> Iterator[Run]:
        from sqlalchemy import text

        with self._engine.begin() as conn:

            def run(sql: str, params: Optional[dict] = None) -> List[tuple]:
                result = conn.execute(text(sql), params or {})
                return [tuple(r) for r in result.fetchall()] if result.returns_rows else []

            if migrate:
                run("SELECT pg_advisory_xact_lock(:k)", {"k": _MIGRATION_LOCK})
            yield run

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        self._opened = False


__all__ = ["ConversationStoreError", "PostgresConversationStore"]
