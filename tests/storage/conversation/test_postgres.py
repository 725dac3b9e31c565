"""PostgreSQL specifics (the shared contract runs in test_base.py against a real server)."""

from __future__ import annotations

import pytest

from llama_index_convrag.errors import ConversationStoreError
from llama_index_convrag.storage.conversation._sql import SCHEMA_VERSION
from llama_index_convrag.storage.conversation.postgres import PostgresConversationStore


def test_rejects_non_postgres_url() -> None:
    with pytest.raises(ValueError, match=r"url must be a postgresql SQLAlchemy URL .*got 'sqlite:///x.db'"):
        PostgresConversationStore("sqlite:///x.db")


def test_unreachable_server_names_url_without_password() -> None:
    pytest.importorskip("psycopg")
    store = PostgresConversationStore("postgresql+psycopg://u:secret@127.0.0.1:1/db?connect_timeout=2")
    with pytest.raises(ConversationStoreError, match=r"cannot connect to PostgreSQL database") as info:
        store.open()
    assert "secret" not in str(info.value)


def test_shared_database_with_other_tables(pg_url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE users (id INTEGER)"))
    engine.dispose()
    store = PostgresConversationStore(pg_url)
    _, a = store.begin_turn("c", "q")
    assert store.get_message(a.id).status == "pending"
    assert store.schema_version() == SCHEMA_VERSION == 4
    store.close()


def test_concurrent_first_open_migrates_once(pg_url: str) -> None:
    import threading

    stores = [PostgresConversationStore(pg_url) for _ in range(4)]
    threads = [threading.Thread(target=s.open) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [s.schema_version() for s in stores] == [4, 4, 4, 4]
    for s in stores:
        s.close()
