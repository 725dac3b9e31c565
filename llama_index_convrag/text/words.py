"""Words and content terms of a text, in any language: Unicode word segmentation, one stop list and one stemmer per
language (:mod:`~llama_index_convrag.text.lexicon`).

:func:`words` cuts a text into tokens: a run of Han characters into jieba's words, a run of kana or Hangul into
overlapping character pairs (as Lucene's CJK analyzer does: no dictionary, and a Korean word matches without its
particle), a command-line option (``--all``) whole, a number with its decimal point whole, any other run of letters,
marks and digits as one word. :func:`terms` keeps the content words, lower-cased and stemmed in the text's language
(its stop words dropped; Latin words of a CJK text as English ones).
"""

from __future__ import annotations

from functools import lru_cache
from typing import List, Optional, Tuple

import regex

from llama_index_convrag.text import lexicon
from llama_index_convrag.text.language import identify
from llama_index_convrag.text.scripts import has_cjk

_TOKEN = regex.compile(
    r"(?P<han>\p{Han}+)|(?P<pairs>[\p{Hiragana}\p{Katakana}ー\p{Hangul}]+)"
    r"|(?P<option>(?<![\p{L}\p{N}])-{1,2}\p{L}[\p{L}\p{N}_-]*)|(?P<number>\d+(?:[.,]\d+)*(?![\p{L}\p{N}_]))"
    r"|(?P<word>(?:(?![\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}])[\p{L}\p{M}\p{N}_])+)"
)


def words(text: str) -> List[str]:
    """The tokens of ``text`` in order, as written (see the module docstring)."""
    return list(_words(text))


@lru_cache(maxsize=4096)  # a turn cuts the same sentence for its numbers, its negations and its refusals
def _words(text: str) -> Tuple[str, ...]:
    out: List[str] = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        token = m.group(0)
        if kind == "han":
            out.extend(w for w in lexicon.chinese_words(token) if w.strip())
        elif kind == "pairs":
            out.extend(token[i : i + 2] for i in range(max(1, len(token) - 1)))
        else:
            out.append(token)
    return tuple(out)


@lru_cache(maxsize=16384)
def _terms(text: str, language: str) -> Tuple[str, ...]:
    latin = "en" if language in ("zh", "ja", "ko") else language
    stops = lexicon.stop_words(latin) | (lexicon.stop_words("zh") if language == "zh" else frozenset())
    stem = lexicon.stemmer(latin)
    out = []
    for token in _words(text):
        low = token.lower()
        if low in stops:
            continue
        if stem is not None and low[0].isalpha() and not low.startswith("-"):
            low = stem(low)
        out.append(low)
    return tuple(out)


def terms(text: str, language: Optional[str] = None) -> List[str]:
    """The content terms of ``text`` in order (see the module docstring); ``language`` (ISO 639-1) as identified
    when None."""
    return list(_terms(text, identify(text) if language is None else language))


@lru_cache(maxsize=16384)
def _lower_words(text: str) -> Tuple[str, ...]:
    return _words(text.lower())


@lru_cache(maxsize=4096)
def _cue(phrase: str) -> Tuple[bool, bool, str, bool, Tuple[str, ...]]:
    """A cue phrase read once: ``(at the start, at the end, its text lower-cased, whether it is CJK, its words)``
    (a rules object checks the same cues every turn)."""
    bare = phrase.strip("^$").lower()
    return phrase.startswith("^"), phrase.endswith("$"), bare, has_cjk(bare), tuple(bare.split())


def holds_phrase(text: str, phrase: str) -> bool:
    """Whether ``text`` holds ``phrase`` (a cue written as words): its words in a row, in any case; a CJK phrase
    where ``text`` holds it. ``"^how"``: at the start of ``text``; ``"吗$"``: at its end (end punctuation aside)."""
    opening, closing, bare, cjk, parts = _cue(phrase)
    if closing:
        end = len(text)
        while end and not text[end - 1].isalnum():
            end -= 1
        text = text[:end]
    if cjk:
        return text.startswith(bare) if opening else text.endswith(bare) if closing else bare in text
    tokens = _lower_words(text)
    n = len(parts)
    if opening or closing:
        return (tokens[:n] if opening else tokens[-n:]) == parts
    return any(tokens[i : i + n] == parts for i in range(len(tokens) - n + 1))


def stem(word: str, language: str = "en") -> str:
    """``word`` lower-cased and stemmed by ``language``'s Snowball stemmer (lower-cased only without one)."""
    fn = lexicon.stemmer(language)
    low = word.lower()
    return fn(low) if fn is not None else low


__all__ = ["holds_phrase", "stem", "terms", "words"]
