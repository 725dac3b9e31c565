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

from functools import lru_cache
from typing import Any, Optional

import regex

from llama_index_convrag.text.scripts import HAN

SUPPORTED = ("en", "de", "fr", "es", "ru", "zh")
"""The languages the rules support: a Snowball stemmer, a stop list and a sentence model each (jieba for Chinese),
and probe dialogues in ``bench/text_languages.py`` measuring them."""
CANDIDATES = SUPPORTED + ("it", "pt", "nl", "pl", "uk", "ja", "ko")
"""The languages the identifier chooses among (restricting it keeps short questions right: 43 of 44 short
questions in en / de / fr / es / ru against 36 unrestricted); those outside :data:`SUPPORTED` turn the rules off."""
UNDETERMINED = "und"
"""The code of a text without letters (ISO 639-2's "undetermined")."""
_KANA = regex.compile(r"[\p{Hiragana}\p{Katakana}]")
_HANGUL = regex.compile(r"\p{Hangul}")
_LETTER = regex.compile(r"\p{L}")

_IDENTIFIER: Optional[Any] = None


def _identifier() -> Any:
    global _IDENTIFIER
    if _IDENTIFIER is None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier  # the model loads once, on first use

        ident = LanguageIdentifier.from_model_file(MODEL_FILE)
        ident.set_languages(list(CANDIDATES))
        _IDENTIFIER = ident
    return _IDENTIFIER


@lru_cache(maxsize=8192)
def identify(text: str) -> str:
    """The ISO 639-1 code of ``text``'s language (:data:`CANDIDATES`), or :data:`UNDETERMINED`."""
    letters = len(_LETTER.findall(text))
    if not letters:
        return UNDETERMINED
    if _HANGUL.search(text) and len(_HANGUL.findall(text)) * 4 >= letters:
        return "ko"
    if _KANA.search(text):
        return "ja"
    if len(HAN.findall(text)) * 4 >= letters:  # a Chinese sentence with a few Latin names is Chinese
        return "zh"
    return str(_identifier().classify(text)[0])


def rules_on(language: str) -> bool:
    """Whether the text rules support ``language`` (:data:`SUPPORTED`)."""
    return language in SUPPORTED


__all__ = ["CANDIDATES", "SUPPORTED", "UNDETERMINED", "identify", "rules_on"]
