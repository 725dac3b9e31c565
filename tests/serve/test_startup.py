"""``startup.py``: the text rules' models loaded before the first turn; what is alive at startup out of the garbage
collector's scans until the server stops."""

from __future__ import annotations

import gc

from llama_index_convrag.serve.startup import SAMPLE, freeze_heap, preload_text_rules, thaw_heap
from llama_index_convrag.text import language, lexicon


def test_the_startup_heap_is_frozen_then_thawed() -> None:
    built = [{"model": "weights"}]  # a tracked object built before the first request
    try:
        assert freeze_heap() >= 1
        assert not any(o is built for o in gc.get_objects())  # out of every generation the collector scans
        assert [{"made": "by a request"}][0] is not None
    finally:
        thaw_heap()
    assert gc.get_freeze_count() == 0 and any(o is built for o in gc.get_objects())


def test_the_text_rules_models_are_loaded_before_the_first_turn() -> None:
    preload_text_rules()
    assert language._identifier.cache_info().currsize == 1  # py3langid's model
    assert lexicon.stop_words.cache_info().currsize >= 2  # NLTK's lists (the identifier's vote reads them all)
    assert language.identify(SAMPLE) == "en"
