"""``Limits`` and ``ServeState`` validate once, naming the bad value."""

from __future__ import annotations

import threading

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.state import Limits, ServeState
from llama_index_convrag.storage.conversation import SQLiteConversationStore


def test_bad_values_are_named() -> None:
    with pytest.raises(ConfigurationError, match=r"max_page_size must be >= 1, got 0"):
        Limits(max_page_size=0)
    with pytest.raises(ConfigurationError, match=r"default_page_size \(30\) must be <= max_page_size \(20\)"):
        Limits(default_page_size=30, max_page_size=20)
    store = SQLiteConversationStore(":memory:")
    with pytest.raises(ConfigurationError, match=r"stream_window_s must be >= 0, got -0.1"):
        ServeState(store=store, engine_for=lambda cid, s: None, stream_window_s=-0.1)
    assert ServeState(store=store, engine_for=lambda cid, s: None).stream_window_s == 0.02


async def test_store_calls_on_the_loop_or_in_the_thread_pool_as_told() -> None:
    store = SQLiteConversationStore(":memory:")
    on_loop = ServeState(store=store, engine_for=lambda cid, s: None, store_on_loop=True)
    threads = ServeState(store=store, engine_for=lambda cid, s: None, store_on_loop=False)
    here = threading.get_ident()
    assert await on_loop.store_call(threading.get_ident) == here
    assert await threads.store_call(threading.get_ident) != here


def test_store_calls_default_to_the_loop_for_sqlite_and_the_thread_pool_for_postgres() -> None:
    from llama_index_convrag.serve.state import calls_on_loop
    from llama_index_convrag.storage.conversation.postgres import PostgresConversationStore

    sqlite = SQLiteConversationStore(":memory:")
    assert ServeState(store=sqlite, engine_for=lambda cid, s: None).store_on_loop is True
    assert ServeState(store=sqlite, engine_for=lambda cid, s: None, store_on_loop=False).store_on_loop is False
    postgres = PostgresConversationStore("postgresql://nobody@127.0.0.1:9/none")  # built, never connected
    assert calls_on_loop(postgres) is False
    assert ServeState(store=postgres, engine_for=lambda cid, s: None).store_on_loop is False


def test_memory_shares_the_servers_store_and_off_reads_the_store() -> None:
    from llama_index_convrag.memory import ConversationMemory, MemoryOptions

    store, other = SQLiteConversationStore(":memory:"), SQLiteConversationStore(":memory:")
    with pytest.raises(ConfigurationError, match="another store than the server's"):
        ServeState(store=store, engine_for=lambda cid, s: None,
                   memory=ConversationMemory(options=MemoryOptions.off(), store=other))
    with pytest.raises(ConfigurationError, match="memory must be a ConversationMemory or None, got dict"):
        ServeState(store=store, engine_for=lambda cid, s: None, memory={})  # type: ignore[arg-type]
    off = ServeState(store=store, engine_for=lambda cid, s: None)
    assert off.memory is None and off.memory_view.store is store and off.memory_view.parts == []
    on = ConversationMemory(options=MemoryOptions.off(), store=store)
    assert ServeState(store=store, engine_for=lambda cid, s: None, memory=on).memory_view is on
