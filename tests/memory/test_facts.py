"""UserFacts with the scripted LLM, the real local model and a real SQLite store: extraction, ADD / UPDATE / DELETE /
NONE, duplicates kept out, the source message kept, owners kept apart."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.facts import UserFacts, parse_action, parse_facts
from llama_index_convrag.memory.options import FactsOptions
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.testing import ScriptedLLM


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteConversationStore]:
    s = SQLiteConversationStore(tmp_path / "conv.db")
    yield s
    s.close()


class Script:
    """Extraction replies by message; reconcile replies by new fact ({id} of the first stored fact shown)."""

    def __init__(self, extract: Dict[str, str], reconcile: Dict[str, str]) -> None:
        self.extract, self.reconcile = extract, reconcile

    def __call__(self, prompt: str) -> str:
        if prompt.startswith("Read the user's message"):
            message = prompt.split("User message:\n", 1)[1].split("\n\nFacts:", 1)[0]
            return self.extract.get(message, "NONE")
        fact = prompt.split("New fact:\n", 1)[1].split("\n\nAction:", 1)[0]
        first_id = re.search(r"^\[([0-9a-f]+)\]", prompt.split("Stored facts:\n", 1)[1], re.M).group(1)
        return self.reconcile[fact].format(id=first_id)


def facts_with(store: Any, embed_model: Any, script: Script, **options: Any) -> tuple:
    llm = ScriptedLLM.from_fn(script)
    return UserFacts(store=store, embed_model=embed_model, options=FactsOptions(enabled=True, **options), llm=llm), llm


def test_parsing_replies() -> None:
    assert parse_facts("- The user lives in Porto.\n* The user has a cat\n\n- The user lives in Porto.") == [
        "The user lives in Porto.", "The user has a cat"]
    assert parse_facts("NONE") == [] and parse_facts("") == []
    assert parse_action("UPDATE abc12\nbecause", ["abc12"]) == ("update", "abc12", "the LLM's choice")
    assert parse_action("delete [abc12]", ["abc12"])[:2] == ("delete", "abc12")
    assert parse_action("NOOP", ["x"])[0] == "none"
    assert parse_action("UPDATE zzz", ["abc12"]) == ("add", None, "UPDATE named 'zzz', not a fact shown: added")
    assert parse_action("I think so", ["x"])[0] == "add"


def test_add_duplicate_update_delete(store: Any, embed_model: Any) -> None:
    script = Script(
        extract={"I live in Porto and I have a cat named Miso.":
                 "- The user lives in Porto.\n- The user has a cat named Miso.",
                 "Did I say I live in Porto?": "- The user lives in Porto.",
                 "I moved to Lisbon last month.": "- The user lives in Lisbon.",
                 "Sadly Miso died.": "- The user no longer has a cat."},
        reconcile={"The user lives in Lisbon.": "UPDATE {id}", "The user no longer has a cat.": "DELETE {id}"})
    facts, llm = facts_with(store, embed_model, script, min_similarity=0.45)
    first = facts.remember("alice", "I live in Porto and I have a cat named Miso.", message_id="m1",
                           conversation_id="c1")
    assert [(d.action, d.fact) for d in first] == [("add", "The user lives in Porto."),
                                                   ("add", "The user has a cat named Miso.")]
    again = facts.remember("alice", "Did I say I live in Porto?", message_id="m2")
    assert [(d.action, d.reason) for d in again] == [("duplicate", "the same text is stored")]
    moved = facts.remember("alice", "I moved to Lisbon last month.", message_id="m3")
    porto = next(f for f in facts.facts("alice", include_history=True) if f.text == "The user lives in Porto.")
    assert [(d.action, d.target) for d in moved] == [("update", porto.id)]
    gone = facts.remember("alice", "Sadly Miso died.", message_id="m4")
    assert [d.action for d in gone] == ["delete"]
    active = facts.facts("alice")
    assert [(f.text, f.source_message_id) for f in active] == [("The user lives in Lisbon.", "m3")]
    history = {f.text: f for f in facts.facts("alice", include_history=True)}
    assert history["The user lives in Porto."].status == "replaced"
    assert history["The user has a cat named Miso."].status == "retracted"
    assert history["The user has a cat named Miso."].conversation_id == "c1"
    assert facts.block_text("alice") == "- The user lives in Lisbon."
    assert llm.call_count == 6  # 4 extractions + 2 reconciles (adds and duplicates ask nothing more)


def test_a_near_duplicate_is_not_stored_twice(store: Any, embed_model: Any) -> None:
    script = Script(extract={"a": "- The user is vegetarian.", "b": "- The user is a vegetarian."}, reconcile={})
    facts, llm = facts_with(store, embed_model, script, duplicate_similarity=0.9)
    facts.remember("alice", "a")
    [d] = facts.remember("alice", "b")
    assert d.action == "duplicate" and d.similarity >= 0.9
    assert [f.text for f in facts.facts("alice")] == ["The user is vegetarian."]


def test_facts_never_cross_owners(store: Any, embed_model: Any) -> None:
    script = Script(extract={"x": "- The user is vegetarian."}, reconcile={})
    facts, _ = facts_with(store, embed_model, script)
    facts.remember("alice", "x")
    [d] = facts.remember("bob", "x")
    assert d.action == "add"  # bob's own fact, not a duplicate of alice's
    alice = facts.facts("alice")
    assert facts.delete("bob", alice[0].id) is False
    assert [f.text for f in facts.facts("alice")] == ["The user is vegetarian."]
    assert facts.delete("alice", alice[0].id) is True and facts.facts("alice") == []
    assert len(facts.facts("bob")) == 1 and facts.forget_all("bob") == 1


def test_off_or_without_llm(store: Any, embed_model: Any) -> None:
    llm = ScriptedLLM.fixed("- The user is tall.")
    off = UserFacts(store=store, embed_model=embed_model, options=FactsOptions(), llm=llm)
    assert off.remember("alice", "I am tall") == [] and llm.call_count == 0
    none = UserFacts(store=store, embed_model=embed_model, options=FactsOptions(enabled=True), llm=None)
    with pytest.raises(ConfigurationError, match="user facts need an LLM"):
        none.remember("alice", "I am tall")


async def test_async_twin(store: Any, embed_model: Any) -> None:
    script = Script(extract={"x": "- The user plays chess."}, reconcile={})
    facts, _ = facts_with(store, embed_model, script)
    [d] = await facts.aremember("alice", "x", message_id="m9")
    assert d.action == "add" and facts.facts("alice")[0].source_message_id == "m9"
