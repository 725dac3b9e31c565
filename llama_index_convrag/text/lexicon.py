"""Stop lists and stemmers per language, from maintained packages: NLTK's stop lists (the copy llama-index-core
ships), Snowball stemmers (PyStemmer), jieba's default dictionary for Chinese words (the dictionary Milvus'
``chinese`` analyzer cuts with, in the same "search" mode).

Each is loaded once, on first use; a language without one gets ``frozenset()`` / None.
"""

from __future__ import annotations

import logging
import threading
from functools import lru_cache
from typing import Any, Callable, FrozenSet, List, Optional

NAMES = {"en": "english", "de": "german", "fr": "french", "es": "spanish", "ru": "russian", "it": "italian",
         "pt": "portuguese", "nl": "dutch", "zh": "chinese"}
"""ISO 639-1 code -> the name NLTK's stop lists and the Snowball stemmers go by."""
REQUEST_WORDS = {"en": frozenset("tell know want need please explain describe give show get got use using used "
                                 "also many much one ones".split()),
                 "zh": frozenset("喜欢 觉得 告诉 可以 可能 想 请 介绍 一下".split())}
"""Words of a request rather than of its subject ("Tell me ...", "I want to know ...", "one of"), beyond NLTK's list:
question terms of the extractive answer and the LLM-free rewrite (``bench/conversational_retrieval.py``: without
them CAsT 2021 loses the gap it closes)."""

_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def stop_words(language: str) -> FrozenSet[str]:
    """NLTK's stop list of ``language`` (ISO 639-1) plus its :data:`REQUEST_WORDS`, lower case; empty for a
    language NLTK has none for."""
    name = NAMES.get(language)
    if name is None:
        return frozenset()
    from llama_index.core.utils import globals_helper  # points NLTK at the stop lists core ships
    from nltk.corpus import stopwords

    with _LOCK:
        globals_helper.wait_for_nltk_check()
        words = stopwords.words(name)
    return frozenset(w.lower() for w in words) | REQUEST_WORDS.get(language, frozenset())


@lru_cache(maxsize=None)
def stemmer(language: str) -> Optional[Callable[[str], str]]:
    """The Snowball stemmer of ``language`` (``english`` is Porter2, as Milvus' ``english`` analyzer stems), or None."""
    name = NAMES.get(language)
    if name is None or language == "zh":
        return None
    import Stemmer

    return Stemmer.Stemmer(name).stemWord


_JIEBA: Optional[Any] = None


def chinese_words(run: str) -> List[str]:
    """jieba's words of a run of Chinese characters, in its search mode with HMM (as Milvus' ``chinese`` analyzer
    cuts): a long word is given with the shorter dictionary words inside it."""
    global _JIEBA
    if _JIEBA is None:
        with _LOCK:
            if _JIEBA is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _JIEBA = jieba
    return _JIEBA.lcut_for_search(run, HMM=True)


__all__ = ["NAMES", "REQUEST_WORDS", "chinese_words", "stemmer", "stop_words"]
