"""The turn port over a real SQLite store: one call loads a turn (history window read, user message and placeholder
stored), one commits it; the async twins do the same off the event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage

from llama_index_convrag.chat.port import StoreTurnPort, TurnOutcome, TurnPort, TurnRequest, turn_port, windowed
from llama_index_convrag.conversational.rewrite import select_history
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.storage.conversation import Citation


def seed(store: Any, *pairs: str) -> None:
    for i, text in enumerate(pairs):
        store.add_message_text("c", "user" if i % 2 == 0 else "assistant", text)


def test_windowed_cuts_the_window_as_select_history_does(store: Any) -> None:
    """Read backwards from the newest message, the window is the one select_history cuts from the whole history:
    leading system text, failed, pending and empty cancelled answers skipped, fewer user turns than the window."""
    for cid in ("c", "other"):
        store.add_message_text(cid, "system", "be brief")
    store.add_message_text("c", "assistant", "hello")
    for i in range(6):
        store.add_message_text("c", "user", f"q{i}")
        status = ["complete", "error", "cancelled", "pending"][i % 4]
        store.add_message_text("c", "assistant", f"a{i}" if i != 2 else "", status=status)
    store.add_message_text("c", "user", "last, unanswered")
    for cid in ("c", "other"):
        full = store.history(cid)
        for window in range(0, 10):
            expected = [full[i] for i in select_history(full, window)]  # type: ignore[arg-type]
            assert windowed(store.get_conversation(cid), window) == expected, (cid, window)
        assert windowed(store.get_conversation(cid), None) == full
    assert [m.content for m in windowed(store.get_conversation("c"), 3)] == ["q4", "a4", "q5", "last, unanswered"]


def test_load_reads_the_window_then_stores_user_and_placeholder(store: Any) -> None:
    seed(store, "q1", "a1", "q2", "a2", "q3", "a3")
    port = StoreTurnPort(store)
    context = port.load(TurnRequest("c", "q4", window=2, streaming=True))
    assert [m.content for m in context.history] == ["q2", "a2", "q3", "a3"]
    assert context.history_ids == [m.id for m in store.get_conversation("c")[2:6]]
    *_, user, placeholder = store.get_conversation("c")
    assert (context.user, context.placeholder) == (user, placeholder)
    assert (user.content, placeholder.status, placeholder.content, placeholder.reply_to) == ("q4", "pending", "",
                                                                                             user.id)
    assert port.load(TurnRequest("c", "q5")).history[0].content == "q1"
    explicit = port.load(TurnRequest("c", "q6", window=2, chat_history=[ChatMessage(role="user", content="x")]))
    assert ([m.content for m in explicit.history], explicit.history_ids) == (["x"], None)


def test_commit_writes_answer_citations_and_record_at_once(store: Any) -> None:
    port = StoreTurnPort(store)
    context = port.load(TurnRequest("c", "q"))
    port.commit(TurnOutcome("c", context.placeholder.id, "answer [1]", "complete", None,
                            (Citation(node_id="n", source_index=0, marker=1),), {"status": "complete"}))
    assert (store.get_message(context.placeholder.id).status, store.get_message(context.placeholder.id).content) == (
        "complete", "answer [1]")
    assert [c.node_id for c in store.get_citations(context.placeholder.id)] == ["n"]
    assert store.get_turn_record(context.placeholder.id)["status"] == "complete"


async def test_the_async_twins_run_off_the_event_loop(store: Any) -> None:
    class Watched(StoreTurnPort):
        threads: list = []

        def load(self, request: TurnRequest) -> Any:
            self.threads.append(threading.get_ident())
            return super().load(request)

        def commit(self, outcome: TurnOutcome) -> None:
            self.threads.append(threading.get_ident())
            super().commit(outcome)

    port = Watched(store)
    context = await port.aload(TurnRequest("c", "q"))
    await port.acommit(TurnOutcome("c", context.placeholder.id, "a", "complete", None, (), {}))
    loop_thread = threading.get_ident()
    assert len(port.threads) == 2 and loop_thread not in port.threads
    assert store.get_message(context.placeholder.id).status == "complete"
    await asyncio.sleep(0)


def test_turn_port_of_a_store_a_port_or_nothing(store: Any) -> None:
    port = StoreTurnPort(store)
    assert turn_port(port) is port and turn_port(store).store is store
    assert turn_port(None).store.get_conversation("x") == []
    with pytest.raises(ConfigurationError, match="conversation_store must be a ConversationStore, a TurnPort or "
                                                 "None, got str: 'chats.db'"):
        turn_port("chats.db")
    with pytest.raises(ArgumentTypeError, match="store must be a ConversationStore, got dict"):
        StoreTurnPort({})  # type: ignore[arg-type]
    assert issubclass(StoreTurnPort, TurnPort)
