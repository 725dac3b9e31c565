"""``heap.py``: what is alive at startup leaves the garbage collector's scans until the server stops."""

from __future__ import annotations

import gc

from llama_index_convrag.serve.heap import freeze_heap, thaw_heap


def test_the_startup_heap_is_frozen_then_thawed() -> None:
    built = [{"model": "weights"}]  # a tracked object built before the first request
    try:
        assert freeze_heap() >= 1
        assert not any(o is built for o in gc.get_objects())  # out of every generation the collector scans
        assert [{"made": "by a request"}][0] is not None
    finally:
        thaw_heap()
    assert gc.get_freeze_count() == 0 and any(o is built for o in gc.get_objects())
