"""Which language a text is in, and whether the text rules support it.

Script first (Unicode properties, :mod:`~llama_index_convrag.text.scripts`): Hangul is Korean, kana Japanese, Han
without kana Chinese. Other text goes to py3langid's model (shipped in its PyPI package, no download), restricted to
:data:`CANDIDATES`, which keeps short questions ("Wie alt ist er?") from being read as a language nobody writes to
this package in. A text without letters is :data:`UNDETERMINED`.

The text rules (stop words, stems, the LLM-free rewrite, answer types) are on for :data:`SUPPORTED` only; for any
other language they are off, and the rule that would have applied says so instead of guessing
(:func:`rules_on`).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Any

from llama_index_convrag.text.lexicon import NAMES, stop_words
from llama_index_convrag.text.scripts import letters_by_script

SUPPORTED = ("en", "de", "fr", "es", "ru", "zh")
"""The languages the rules support: a Snowball stemmer, a stop list and a sentence model each (jieba for Chinese),
and probe dialogues in ``bench/text_languages.py`` measuring them."""
CANDIDATES = SUPPORTED + ("it", "pt", "nl", "pl", "uk", "ja", "ko")
"""The languages the identifier chooses among (restricting it keeps short questions right: 43 of 44 short
questions in en / de / fr / es / ru against 36 unrestricted); those outside :data:`SUPPORTED` turn the rules off."""
UNDETERMINED = "und"
"""The code of a text without letters (ISO 639-2's "undetermined")."""


@lru_cache(maxsize=1)
def _identifier() -> Any:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier  # the model loads once, on first use

    ident = LanguageIdentifier.from_model_file(MODEL_FILE)
    ident.set_languages(list(CANDIDATES))
    return ident


@lru_cache(maxsize=8192)
def identify(text: str) -> str:
    """The ISO 639-1 code of ``text``'s language (:data:`CANDIDATES`), or :data:`UNDETERMINED`."""
    counts = letters_by_script(text)
    letters = sum(counts.values())
    if not letters:
        return UNDETERMINED
    if counts.get("hangul", 0) * 4 >= letters:
        return "ko"
    if counts.get("kana"):
        return "ja"
    if counts.get("han", 0) * 4 >= letters:  # a Chinese sentence with a few Latin names is Chinese
        return "zh"
    guess = str(_identifier().classify(text)[0])
    return _by_stop_words(text, guess)


def _by_stop_words(text: str, guess: str) -> str:
    """``guess``, unless another language's stop list holds more of ``text``'s words than ``guess``'s and than any
    other's: a short question is mostly names and stop words ("Who was Albert Einstein?" is read as German by the
    model; "who" is an English stop word, "was" a German and an English one)."""
    plain = ["".join(ch for ch in w if not unicodedata.category(ch).startswith("P")) for w in text.lower().split()]
    votes = {lang: sum(w in stop_words(lang) for w in plain) for lang in CANDIDATES if lang in NAMES and lang != "zh"}
    best = max(votes.values(), default=0)
    leaders = [lang for lang, v in votes.items() if v == best]
    return leaders[0] if len(leaders) == 1 and best > votes.get(guess, 0) else guess


def rules_on(language: str) -> bool:
    """Whether the text rules support ``language`` (:data:`SUPPORTED`)."""
    return language in SUPPORTED


__all__ = ["CANDIDATES", "SUPPORTED", "UNDETERMINED", "identify", "rules_on"]
