"""Sentences of a text: NLTK's Punkt models (the copy llama-index-core ships) in the text's language, and a cut
after every full-width sentence terminal (Unicode ``Sentence_Terminal`` of East Asian width, as 。！？: Chinese and
Japanese put no space after them), each sentence keeping its closing quotes and brackets.

What is format, not language, is kept: blank lines end a paragraph; single line breaks are read as spaces
(hard-wrapped text), except that a Markdown table row, a heading, a list item and a man page's section heading
start a sentence of their own (a table row is one sentence whatever it holds). A piece Punkt cut off that starts in
lower case is joined back to the sentence before it ("e.g. the ...": an abbreviation, not an end).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, List, Optional, Sequence, Tuple

import regex

from llama_index_convrag.text.language import identify
from llama_index_convrag.text.lexicon import LOCK, NAMES

#: A line that starts a unit of its own: a Markdown table row, a heading, a bullet or numbered item.
_BLOCK_START = regex.compile(r"^\s*(?:\||#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s)")
#: A line that is a unit by itself: a table row, a Markdown heading or a man page's section heading ("AUTHOR").
_BLOCK_WHOLE = regex.compile(r"^\s*(?:\||#{1,6}\s)|^[A-Z][A-Z ]{3,}$")
_TERMINAL = regex.compile(r"[\p{Sentence_Terminal}\n]")
#: After a full-width sentence terminal and its closing quotes or brackets, before the next character.
_WIDE_END = regex.compile(
    r"(?<=[\p{Sentence_Terminal}&&[\p{East_Asian_Width=W}\p{East_Asian_Width=F}]][\p{Pf}\p{Pe}]*)\s*(?=[^\s\p{Pf}\p{Pe}])", regex.V1)


@lru_cache(maxsize=None)
def _punkt(language: str) -> Any:
    """NLTK's Punkt tokenizer of ``language`` (English for a language NLTK has no Punkt model of)."""
    from llama_index.core.utils import globals_helper  # points NLTK at the models core ships
    from nltk.tokenize import PunktTokenizer

    with LOCK:
        globals_helper.wait_for_nltk_check()
        try:
            return PunktTokenizer(NAMES.get(language, "english"))
        except LookupError:  # no model of that language
            return PunktTokenizer("english")


def _blocks(text: str) -> List[str]:
    """The blocks of ``text``: a blank line ends one; a line that starts a unit of its own starts one."""
    blocks: List[str] = []
    blank = True
    for line in text.splitlines():
        if not line.strip():
            blank = True
            continue
        if blank or _BLOCK_START.match(line) or _BLOCK_WHOLE.match(blocks[-1]):
            blocks.append(line)
        else:
            blocks[-1] += "\n" + line
        blank = False
    return blocks


def _split_block(block: str, language: str) -> List[str]:
    line = " ".join(block.split())
    if not line:
        return []
    if line.startswith("|"):
        return [line]
    pieces: List[str] = []
    for part in _punkt(language).tokenize(line):
        for piece in _WIDE_END.split(part):
            piece = piece.strip()
            if pieces and piece and not any(ch.isalnum() for ch in piece):
                pieces[-1] += piece  # "Really?" "!": punctuation Punkt cut off ends the sentence before it
            elif pieces and piece[:1].islower():
                pieces[-1] = f"{pieces[-1]} {piece}"
            elif piece:
                pieces.append(piece)
    return pieces


@lru_cache(maxsize=4096)
def _split(text: str, language: str) -> tuple:
    return tuple(s for block in _blocks(text) for s in _split_block(block, language) if any(ch.isalnum() for ch in s))


def may_end_sentence(text: str) -> bool:
    """Whether ``text`` holds a character a sentence can end at: a line break or a Unicode ``Sentence_Terminal``
    (``.``, ``!``, ``?``, 。, ！, ？ ...); text without one is at most one sentence."""
    return _TERMINAL.search(text) is not None


def sentence_spans(text: str, language: str = "") -> List[Tuple[int, int, str]]:
    """``(start, end, sentence)`` of each sentence of ``text`` (:func:`split_sentences`) in ``text`` itself: a
    sentence is ``text``'s words, whitespace normalised, so its words are found with any whitespace between."""
    spans: List[Tuple[int, int, str]] = []
    pos = 0
    for sentence in split_sentences(text, language):
        found = _locate(text, sentence.split(), pos)
        if found is not None:
            spans.append((found[0], found[1], sentence))
            pos = found[1]
    return spans


def _locate(text: str, parts: Sequence[str], pos: int) -> Optional[Tuple[int, int]]:
    """``(start, end)`` of the first place from ``pos`` where ``text`` holds ``parts`` with whitespace between."""
    start = text.find(parts[0], pos) if parts else -1
    if start >= 0:  # the usual case, one space between the words: one comparison instead of one per character
        joined = " ".join(parts)
        if text.startswith(joined, start):
            return start, start + len(joined)
    while start >= 0:
        end = start + len(parts[0])
        for part in parts[1:]:
            gap = end
            while gap < len(text) and text[gap].isspace():
                gap += 1
            if gap == end or not text.startswith(part, gap):
                break
            end = gap + len(part)
        else:
            return start, end
        start = text.find(parts[0], start + 1)
    return None


def split_sentences(text: str, language: str = "") -> List[str]:
    """The sentences of ``text`` in order, whitespace-normalised; fragments without a letter or digit dropped
    (``language``: ISO 639-1, identified when empty)."""
    return list(_split(text, language or identify(text)))


__all__ = ["may_end_sentence", "sentence_spans", "split_sentences"]
