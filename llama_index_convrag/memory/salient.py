"""The summary without an LLM: the names and numbers a conversation mentions, most frequent first, under a token cap.

Pure. A name is a capitalised word that does not open a sentence (``Sweden``, ``LGBTQ``); a number is a run of digits.
What it is worth against episodic recall is measured in ``bench/memory_recall.py`` (answer words covered per
prompt token); the engine's default without an LLM is no summary (:class:`~.options.SummaryOptions`).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Iterable, List

from llama_index_convrag.text import stem

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+(?:[.,:]\d+)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)\s*[\"'(]*$")
HEADER = "Names and numbers mentioned earlier: "


def salient_terms(texts: Iterable[str]) -> List[str]:
    """Names and numbers of ``texts``, most frequent first (ties: first seen), each once (stems compared)."""
    counts: Counter = Counter()
    shown = {}
    order = {}
    for text in texts:
        for m in _TOKEN.finditer(text):
            word = m.group(0).strip("'’-")
            if not word:
                continue
            is_number = word[0].isdigit()
            is_name = word[0].isupper() and not _SENTENCE_START.search(text[: m.start()]) and len(word) > 1
            if not (is_number or is_name) or word.upper() == "I":
                continue
            key = word if is_number else stem(word)
            counts[key] += 1
            shown.setdefault(key, word)
            order.setdefault(key, len(order))
    ranked = sorted(counts, key=lambda k: (-counts[k], order[k]))
    return [shown[k] for k in ranked]


def salient_summary(texts: Iterable[str], max_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """``HEADER`` and as many salient terms as fit in ``max_tokens`` ("" when none fits or none was found)."""
    terms = salient_terms(texts)
    kept: List[str] = []
    for term in terms:
        candidate = HEADER + ", ".join(kept + [term]) + "."
        if count_tokens(candidate) > max_tokens:
            break
        kept.append(term)
    return HEADER + ", ".join(kept) + "." if kept else ""
