"""The one definition of CJK text in the package: which characters are Chinese, Japanese or Korean script.

Unicode script properties (the ``regex`` module's ``\\p{Han}``, ``\\p{Hiragana}``, ``\\p{Katakana}``, ``\\p{Hangul}``)
decide, not code-point ranges written by hand: Han ideographs (every CJK block and extension), the two kana and
Hangul syllables and jamo.
"""

from __future__ import annotations

from collections import Counter
from typing import Dict

import regex

HAN = regex.compile(r"\p{Han}")
"""One Han ideograph (Chinese characters, Japanese kanji)."""
CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
"""One CJK character: Han, kana or Hangul (text written without spaces between words, or, for Korean, with words
that carry their particles)."""
_SCRIPT = regex.compile(r"(?P<han>\p{Han})|(?P<kana>[\p{Hiragana}\p{Katakana}])|(?P<hangul>\p{Hangul})|(?P<other>\p{L})")


def is_cjk(ch: str) -> bool:
    """Whether the character ``ch`` is CJK (:data:`CJK`)."""
    return CJK.match(ch) is not None


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character."""
    return CJK.search(text) is not None


def letters_by_script(text: str) -> Dict[str, int]:
    """How many of ``text``'s letters are ``han``, ``kana``, ``hangul`` or ``other`` (any other script)."""
    return dict(Counter(m.lastgroup for m in _SCRIPT.finditer(text)))


__all__ = ["CJK", "HAN", "has_cjk", "is_cjk", "letters_by_script"]
