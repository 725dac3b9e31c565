"""RunningSummary with the scripted LLM and a real SQLite store: what is folded, the cap never exceeded, versions,
the user's edit and clear, the no-LLM modes, and the async twin."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest

from llama_index_convrag.config.tokens import count_tokens
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.options import SummaryOptions
from llama_index_convrag.memory.summary import RunningSummary, pending
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation.base import Message
from llama_index_convrag.testing import ScriptedLLM


def talk(n: int, conv: str = "c") -> List[Message]:
    return [Message(id=f"m{i}", conversation_id=conv, role="user" if i % 2 == 0 else "assistant",
                    content=f"message {i} about Lisbon" if i % 2 == 0 else f"answer {i}") for i in range(n)]


@pytest.fixture
def store(tmp_path: Path) -> SQLiteConversationStore:
    s = SQLiteConversationStore(tmp_path / "conv.db")
    s.create_conversation("alice", conversation_id="c")
    yield s
    s.close()


def test_pending_is_what_left_the_window_and_is_not_covered() -> None:
    msgs = talk(10)
    assert [m.id for m in pending(msgs, 6, None)] == ["m0", "m1", "m2", "m3"]
    assert [m.id for m in pending(msgs, 6, "m1")] == ["m2", "m3"]
    assert pending(msgs, 6, "m3") == [] and pending(talk(4), 6, None) == []
    assert pending(msgs, 6, "m8") == []  # an edit that covers the window already
    assert [m.id for m in pending(msgs, 6, "gone")] == ["m0", "m1", "m2", "m3"]


def test_fold_writes_a_version_that_says_what_it_covers(store: SQLiteConversationStore) -> None:
    llm = ScriptedLLM.cycle(["Alice plans a trip to Lisbon.", "Alice plans Lisbon; asked about rain."])
    summary = RunningSummary(store=store, options=SummaryOptions(max_tokens=50, window=6), llm=llm)
    assert summary.fold("alice", "c", talk(6)).version is None and llm.call_count == 0
    first = summary.fold("alice", "c", talk(8))
    assert (first.version.version, first.version.covers_to, first.version.covered, first.llm_calls) == (1, "m1", 2, 1)
    assert "message 0 about Lisbon" in llm.prompts[0] and "(none yet)" in llm.prompts[0]
    assert "at most 37 words" in llm.prompts[0]
    second = summary.fold("alice", "c", talk(10))
    assert (second.version.version, second.version.covers_to, second.version.covered) == (2, "m3", 4)
    assert "Alice plans a trip to Lisbon." in llm.prompts[1] and "message 2 about Lisbon" in llm.prompts[1]
    assert "message 0" not in llm.prompts[1]
    assert summary.fold("alice", "c", talk(10)).version is None  # nothing new left the window
    assert summary.view("alice", "c").text == "Alice plans Lisbon; asked about rain."
    assert summary.view("bob", "c") is None


def test_the_cap_is_never_exceeded(store: SQLiteConversationStore) -> None:
    long = " ".join(["word"] * 200)
    llm = ScriptedLLM.cycle([long, "short enough now"])
    summary = RunningSummary(store=store, options=SummaryOptions(max_tokens=20, window=2), llm=llm)
    done = summary.fold("alice", "c", talk(4))
    assert done.shortened and not done.cut and done.llm_calls == 2
    assert done.version.text == "short enough now"
    stubborn = RunningSummary(store=store, options=SummaryOptions(max_tokens=20, window=2),
                              llm=ScriptedLLM.fixed(long))
    cut = stubborn.fold("alice", "c", talk(6))
    assert cut.shortened and cut.cut and cut.llm_calls == 2
    assert count_tokens(cut.version.text) <= 20 and cut.version.tokens <= 20
    assert cut.to_record() == {"version": 2, "llm_calls": 2, "shortened": True, "cut": True}


def test_edit_and_clear(store: SQLiteConversationStore) -> None:
    summary = RunningSummary(store=store, options=SummaryOptions(max_tokens=16), llm=None)
    edited = summary.edit("alice", "c", "Alice is vegetarian.")
    assert (edited.version, edited.source, edited.covers_to) == (1, "edit", None)
    with pytest.raises(ConfigurationError, match=r"the summary has \d+ tokens, over the cap of 16"):
        summary.edit("alice", "c", " ".join(["long"] * 40))
    assert summary.clear("alice", "c") == 1 and summary.view("alice", "c") is None


def test_without_an_llm_none_or_salient(store: SQLiteConversationStore) -> None:
    off = RunningSummary(store=store, options=SummaryOptions(window=2, no_llm="none"), llm=None)
    assert off.fold("alice", "c", talk(6)).version is None and off.view("alice", "c") is None
    salient = RunningSummary(store=store, options=SummaryOptions(window=2, no_llm="salient", max_tokens=40),
                             llm=None)
    done = salient.fold("alice", "c", talk(6))
    assert done.version.source == "salient" and done.llm_calls == 0
    assert done.version.text == "Names and numbers mentioned earlier: Lisbon, 0, 1, 2, 3."
    assert done.version.covers_to == "m3"


def test_disabled_does_nothing(store: SQLiteConversationStore) -> None:
    llm = ScriptedLLM.fixed("x")
    assert RunningSummary(store=store, options=SummaryOptions(enabled=False), llm=llm).fold(
        "alice", "c", talk(20)).version is None
    assert llm.call_count == 0


def test_prompts_can_be_replaced(store: SQLiteConversationStore) -> None:
    from llama_index.core.prompts import PromptTemplate

    llm = ScriptedLLM.fixed("ok")
    summary = RunningSummary(store=store, options=SummaryOptions(window=2), llm=llm)
    assert set(summary.get_prompts()) == {"fold_prompt", "shorten_prompt"}
    summary.update_prompts({"fold_prompt": PromptTemplate("FOLD {summary} | {messages} | {max_words}")})
    summary.fold("alice", "c", talk(4))
    assert llm.prompts[0].startswith("FOLD (none yet) | user: message 0 about Lisbon")


async def test_async_fold_matches(store: SQLiteConversationStore) -> None:
    llm = ScriptedLLM.fixed("Alice and Lisbon.")
    summary = RunningSummary(store=store, options=SummaryOptions(window=2), llm=llm)
    done = await summary.afold("alice", "c", talk(6))
    assert (done.version.version, done.version.covers_to, done.llm_calls) == (1, "m3", 1)
    assert (await summary.afold("alice", "c", talk(6))).version is None
