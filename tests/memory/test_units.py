"""Memory units: their indexed texts, keys, and the recalled block."""

from __future__ import annotations

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.units import (MemoryUnit, Recall, RecalledUnit, context_text, own_text,
                                              unit_key)


def unit(position: int, text: str, speaker: str = "user", session: str = "1", **kw: object) -> MemoryUnit:
    return MemoryUnit(owner="alice", conversation_id="c1", position=position, message_id=f"m{position}",
                      speaker=speaker, text=text, session=session, **kw)  # type: ignore[arg-type]


def test_texts_carry_date_speaker_and_the_message_answered() -> None:
    q = unit(0, "What did you research?", speaker="Mel", date="8 May 2023")
    a = unit(1, "Adoption agencies.", speaker="Caroline", date="8 May 2023")
    assert own_text(a) == "8 May 2023\nCaroline: Adoption agencies."
    assert context_text(a, [q]) == "8 May 2023\nMel: What did you research?\nCaroline: Adoption agencies."
    other_session = unit(2, "Hi again", session="2")
    assert context_text(other_session, [q, a]) == "user: Hi again"


def test_date_label_comes_from_the_time_when_not_given() -> None:
    assert unit(0, "x", time=1_683_504_000.0).date_label == "08 May 2023"
    assert unit(0, "x").date_label == ""


def test_keys_differ_per_owner_and_conversation() -> None:
    assert unit_key("alice", "c1", 3).endswith(":3")
    assert unit_key("alice", "c1", 3) != unit_key("bob", "c1", 3) != unit_key("alice", "c2", 3)
    assert unit(3, "x").unit_id == unit_key("alice", "c1", 3)


@pytest.mark.parametrize("field,value,message", [
    ("owner", "", "MemoryUnit.owner must be a non-empty string, got ''"),
    ("position", -1, "MemoryUnit.position must be an int >= 0, got -1"),
])
def test_bad_units_name_the_value(field: str, value: object, message: str) -> None:
    args = dict(owner="a", conversation_id="c", position=0, message_id="m", speaker="user", text="t")
    args[field] = value
    with pytest.raises(ConfigurationError, match=message):
        MemoryUnit(**args)  # type: ignore[arg-type]


def test_the_block_lists_recalled_messages_in_conversation_order() -> None:
    units = [RecalledUnit(position=9, message_id="m9", speaker="user", text="later", date="2 May", turn=4,
                          score=0.9),
             RecalledUnit(position=2, message_id="m2", speaker="assistant", text="earlier", date="", turn=1,
                          score=0.5, spread_from=[1])]
    got = Recall(units=units, before=12, k=2, latency_ms=1.23456)
    assert got.block_text() == "[#2] assistant: earlier\n[#9 (2 May)] user: later"
    record = got.to_record()
    assert record["before"] == 12 and record["latency_ms"] == 1.235
    assert [u["position"] for u in record["units"]] == [9, 2] and record["units"][1]["spread_from"] == [1]
    assert Recall(units=[], before=None, k=3).block_text() == ""


def test_a_recalled_units_dict_holds_every_field_with_its_lists_copied() -> None:
    import dataclasses

    found_by = [{"search": "dense:own", "rank": 1, "score": 0.8}]
    unit = RecalledUnit(position=3, message_id="m3", speaker="user", text="hi", date="1 May", turn=1, score=0.5,
                        found_by=found_by, spread_from=[4], speaker_named=True, bridged=0.25)
    got = unit.to_dict()
    assert got == dataclasses.asdict(unit) and list(got) == [f.name for f in dataclasses.fields(unit)]
    got["found_by"][0]["rank"] = 9
    got["spread_from"].append(5)
    assert unit.found_by == [{"search": "dense:own", "rank": 1, "score": 0.8}] and unit.spread_from == [4]
