"""RowCache: the recalled fields per conversation, filled, replaced, dropped and bounded exactly as documented."""

from __future__ import annotations

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.episodic_rows import RowCache, unit_row
from llama_index_convrag.memory.episodic_schema import OWN
from llama_index_convrag.memory.units import MemoryUnit, unit_key

A, B = ("alice", "c1"), ("bob", "c1")


def row(position: int, text: str = "hi", scope: tuple = A) -> dict:
    return {"position": position, "metadata": {"raw": text}, "owner": scope[0], "conversation_id": scope[1]}


def test_a_units_row_is_what_a_get_of_the_output_fields_returns() -> None:
    u = MemoryUnit(owner="alice", conversation_id="c1", position=3, message_id="m3", speaker="Ana", text="Hello",
                   turn=1, time=1_700_000_000.0, date="1 May 2023", session="2")
    assert unit_row(u) == {"id": unit_key("alice", "c1", 3), "position": 3, "kind": OWN, "owner": "alice",
                           "conversation_id": "c1", "metadata": {"message_id": "m3", "speaker": "Ana", "turn": 1,
                                                                 "time": 1_700_000_000.0, "date": "1 May 2023",
                                                                 "session": "2", "raw": "Hello"}}


def test_split_answers_the_cached_positions_of_one_scope_only() -> None:
    cache = RowCache()
    cache.put(A, [row(0), row(2, "two")])
    found, missing = cache.split(A, [2, 1, 0])
    assert found == {2: row(2, "two"), 0: row(0)} and missing == [1]
    assert cache.split(B, [0, 2]) == ({}, [0, 2])  # another owner's conversation shares nothing
    cache.put(A, [row(2, "again")])
    assert cache.split(A, [2])[0] == {2: row(2, "again")} and len(cache) == 2


def test_drop_forget_and_clear_delete_and_refuse_reads_that_began_before() -> None:
    cache = RowCache()
    cache.put(A, [row(0), row(1)])
    cache.put(B, [row(0, scope=B)])
    mark = cache.mark()
    cache.drop(A, [1, 7])
    assert cache.split(A, [0, 1]) == ({0: row(0)}, [1]) and len(cache) == 2
    cache.put(A, [row(1)], mark)  # read before the delete: it may be gone
    assert cache.split(A, [1])[1] == [1]
    cache.put(A, [row(1)], cache.mark())
    assert cache.split(A, [1])[1] == []
    cache.forget(A)
    assert cache.split(A, [0, 1])[1] == [0, 1] and len(cache) == 1
    cache.clear()
    assert cache.split(B, [0])[1] == [0] and len(cache) == 0


def test_past_the_bound_the_least_recently_used_conversations_are_forgotten() -> None:
    cache = RowCache(max_rows=3)
    cache.put(A, [row(0), row(1)])
    cache.put(B, [row(0, scope=B)])
    cache.split(A, [0])  # A used last
    cache.put(("carol", "c1"), [row(0, scope=("carol", "c1"))])
    assert cache.split(B, [0])[1] == [0] and cache.split(A, [0, 1])[1] == [] and len(cache) == 3
    off = RowCache(max_rows=0)
    off.put(A, [row(0)])
    assert off.split(A, [0]) == ({}, [0]) and len(off) == 0


def test_a_position_read_without_a_row_is_absent_until_a_search_finds_it_or_it_is_written() -> None:
    cache = RowCache()
    cache.put(A, [row(0)], cache.mark(), absent=[1])
    assert cache.split(A, [0, 1]) == ({0: row(0)}, []) and len(cache) == 2  # 1: known to have no row
    assert cache.split(A, [0, 1], found_by_search={1}) == ({0: row(0)}, [1])  # a search found it: read again
    cache.put(A, [row(1)])
    assert cache.split(A, [1]) == ({1: row(1)}, []) and len(cache) == 2
    cache.drop(A, [1])
    assert cache.split(A, [1]) == ({}, [1]) and len(cache) == 1


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_a_bad_bound_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=rf"max_rows must be an int >= 0 \(0 caches nothing\), got {bad!r}"):
        RowCache(bad)  # type: ignore[arg-type]
