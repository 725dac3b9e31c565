"""Sentences of a text: NLTK's Punkt models (the copy llama-index-core ships) in the text's language, and a cut
after every full-width sentence terminal (Unicode ``Sentence_Terminal`` of East Asian width, as 。！？: Chinese and
Japanese put no space after them), each sentence keeping its closing quotes and brackets.

What is format, not language, is kept: blank lines end a paragraph; single line breaks are read as spaces
(hard-wrapped text), except that a Markdown table row, a heading, a list item and a man page's section heading
start a sentence of their own (a table row is one sentence whatever it holds). A piece Punkt cut off that starts in
lower case is joined back to the sentence before it ("e.g. the ...": an abbreviation, not an end).
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any, Dict, List

import regex

from llama_index_convrag.text.language import identify
from llama_index_convrag.text.lexicon import NAMES

_PARAGRAPH = regex.compile(r"\n\s*\n")
#: A line that starts a unit of its own: a Markdown table row, a heading, a bullet or numbered item.
_BLOCK_START = regex.compile(r"^\s*(?:\||#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s)")
#: A line that is a unit by itself: a table row, a Markdown heading or a man page's section heading ("AUTHOR").
_BLOCK_WHOLE = regex.compile(r"^\s*(?:\||#{1,6}\s)|^[A-Z][A-Z ]{3,}$")
#: After a full-width sentence terminal and its closing quotes or brackets, before the next character.
_WIDE_END = regex.compile(
    r"(?<=[\p{Sentence_Terminal}&&[\p{East_Asian_Width=W}\p{East_Asian_Width=F}]][\p{Pf}\p{Pe}]*)\s*(?=[^\s\p{Pf}\p{Pe}])", regex.V1)
_PUNKT_LANGUAGES = frozenset({"en", "de", "fr", "es", "ru", "it", "pt", "nl", "pl"})
_TOKENIZERS: Dict[str, Any] = {}
_LOCK = threading.Lock()


def _punkt(language: str) -> Any:
    """NLTK's Punkt tokenizer of ``language`` (English for a language it has no model of)."""
    name = NAMES.get(language, "english") if language in _PUNKT_LANGUAGES else "english"
    if language == "pl":
        name = "polish"
    tok = _TOKENIZERS.get(name)
    if tok is None:
        from llama_index.core.utils import globals_helper  # points NLTK at the models core ships
        from nltk.tokenize import PunktTokenizer

        with _LOCK:
            globals_helper.wait_for_nltk_check()
            tok = _TOKENIZERS[name] = PunktTokenizer(name)
    return tok


def _blocks(paragraph: str) -> List[str]:
    blocks: List[str] = []
    for line in paragraph.splitlines():
        if not blocks or _BLOCK_START.match(line) or _BLOCK_WHOLE.match(blocks[-1]):
            blocks.append(line)
        else:
            blocks[-1] += "\n" + line
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
    return tuple(s for paragraph in _PARAGRAPH.split(text) for block in _blocks(paragraph)
                 for s in _split_block(block, language) if any(ch.isalnum() for ch in s))


def split_sentences(text: str, language: str = "") -> List[str]:
    """The sentences of ``text`` in order, whitespace-normalised; fragments without a letter or digit dropped
    (``language``: ISO 639-1, identified when empty)."""
    return list(_split(text, language or identify(text)))


__all__ = ["split_sentences"]
