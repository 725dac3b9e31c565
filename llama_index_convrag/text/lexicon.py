"""Stop lists and stemmers per language, from maintained packages: NLTK's stop lists (the copy llama-index-core
ships), Snowball stemmers (PyStemmer), jieba's default dictionary for Chinese words (the dictionary Milvus'
``chinese`` analyzer cuts with, in the same "search" mode).

Each is loaded once, on first use; a language without one gets ``frozenset()`` / None.
"""

from __future__ import annotations

import logging
import threading
from functools import lru_cache
from typing import Any, Callable, FrozenSet, List, Optional, Tuple

NAMES = {"en": "english", "de": "german", "fr": "french", "es": "spanish", "ru": "russian", "it": "italian",
         "pt": "portuguese", "nl": "dutch", "zh": "chinese"}
"""ISO 639-1 code -> the name NLTK's stop lists and the Snowball stemmers go by."""

LOCK = threading.Lock()
"""Held while NLTK loads a list or a model (its lazy loaders are not thread-safe)."""


@lru_cache(maxsize=None)
def stop_words(language: str) -> FrozenSet[str]:
    """NLTK's stop list of ``language`` (ISO 639-1), lower case; empty for a language NLTK has none for."""
    name = NAMES.get(language)
    if name is None:
        return frozenset()
    from llama_index.core.utils import globals_helper  # points NLTK at the stop lists core ships
    from nltk.corpus import stopwords

    with LOCK:
        globals_helper.wait_for_nltk_check()
        words = stopwords.words(name)
    return frozenset(w.lower() for w in words)


@lru_cache(maxsize=None)
def month_names(language: str = "en") -> Tuple[str, ...]:
    """The month names of ``language`` with their short forms, lower case, longest first ("september", "sept",
    "sep"): ``dateutil``'s table for English; ``()`` for another language."""
    if language != "en":
        return ()
    from dateutil.parser import parserinfo

    return tuple(sorted({n.lower() for names in parserinfo.MONTHS for n in names}, key=lambda n: (-len(n), n)))


@lru_cache(maxsize=None)
def stemmer(language: str) -> Optional[Callable[[str], str]]:
    """The Snowball stemmer of ``language`` (``english`` is Porter2, as Milvus' ``english`` analyzer stems), or None."""
    name = NAMES.get(language)
    if name is None or language == "zh":
        return None
    import Stemmer

    return Stemmer.Stemmer(name).stemWord


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import jieba

    with LOCK:
        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
    return jieba


def chinese_words(run: str) -> List[str]:
    """jieba's words of a run of Chinese characters, in its search mode with HMM (as Milvus' ``chinese`` analyzer
    cuts): a long word is given with the shorter dictionary words inside it."""
    return _jieba().lcut_for_search(run, HMM=True)


__all__ = ["LOCK", "NAMES", "chinese_words", "month_names", "stemmer", "stop_words"]
