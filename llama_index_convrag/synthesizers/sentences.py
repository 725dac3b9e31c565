"""Pure helpers of the ``extractive`` mode: split text into sentences, pick the best ones, write the answer.

Sentences end at ``.``, ``!`` or ``?`` followed by whitespace and a word that does not start in lower case (so
"e.g. the" and "3.5" do not split), at ``。``, ``！``, ``？`` (Chinese and Japanese, no space needed), each with any
closing quotes or brackets, and at blank lines. Single line breaks are read as spaces (hard-wrapped text).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence

CLOSERS = "\"'”’)]」』）》"
_CLOSE = "[" + re.escape(CLOSERS) + "]*"
_END = re.compile(rf"(?:[。！？]+|[.!?]+(?={_CLOSE}(?:\s|$))){_CLOSE}")
_PARAGRAPH = re.compile(r"\n\s*\n")
_CJK_END = frozenset("。！？" + CLOSERS)


@dataclass(frozen=True)
class Sentence:
    """One sentence of chunk ``chunk`` (0-based), ``position`` within that chunk."""

    chunk: int
    position: int
    text: str


def _split_paragraph(paragraph: str) -> List[str]:
    line = " ".join(paragraph.split())
    pieces: List[str] = []
    start = 0
    for match in _END.finditer(line):
        rest = line[match.end() :].lstrip()
        if match.group(0)[0] in ".!?" and rest[:1].islower():
            continue  # an abbreviation ("e.g. the") or a lower-case continuation
        pieces.append(line[start : match.end()].strip())
        start = match.end()
    pieces.append(line[start:].strip())
    return [p for p in pieces if any(ch.isalnum() for ch in p)]


def split_sentences(text: str) -> List[str]:
    """The sentences of ``text`` in order, whitespace-normalised; fragments without a letter or digit dropped."""
    return [s for paragraph in _PARAGRAPH.split(text) for s in _split_paragraph(paragraph)]


def sentences_of(chunks: Sequence[str]) -> List[Sentence]:
    """Every sentence of every chunk, in document order, each distinct sentence once (first occurrence kept)."""
    seen = set()
    out: List[Sentence] = []
    for chunk_index, chunk in enumerate(chunks):
        for position, text in enumerate(split_sentences(chunk)):
            if text not in seen:
                seen.add(text)
                out.append(Sentence(chunk_index, position, text))
    return out


def cosine(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> List[float]:
    """Cosine similarity of ``query`` with each vector (0.0 for a zero vector)."""
    qn = math.sqrt(sum(q * q for q in query))
    scores = []
    for v in vectors:
        vn = math.sqrt(sum(x * x for x in v))
        scores.append(sum(q * x for q, x in zip(query, v)) / (qn * vn) if qn and vn else 0.0)
    return scores


def select(
    scores: Sequence[float],
    lengths: Sequence[int],
    max_sentences: int,
    max_tokens: Optional[int] = None,
    similarity_cutoff: Optional[float] = None,
) -> List[int]:
    """Indexes of the chosen sentences, best first: highest score first, at most ``max_sentences``, skipping a
    sentence that would take the total of ``lengths`` past ``max_tokens`` or scores below ``similarity_cutoff``.
    Ties keep document order."""
    chosen: List[int] = []
    total = 0
    for i in sorted(range(len(scores)), key=lambda j: (-scores[j], j)):
        if len(chosen) == max_sentences:
            break
        if similarity_cutoff is not None and scores[i] < similarity_cutoff:
            break
        if max_tokens is not None and total + lengths[i] > max_tokens:
            continue
        chosen.append(i)
        total += lengths[i]
    return chosen


def _join(left: str, right: str) -> str:
    return left + right if left[-1:] in _CJK_END and not left[-1:].isascii() else f"{left} {right}"


def compose(sentences: Sequence[Sentence]) -> str:
    """The chosen sentences in document order; each run of sentences from one chunk ends with its marker ``[n]``
    (``n`` = chunk index + 1, as the citation mode numbers sources)."""
    ordered = sorted(sentences, key=lambda s: (s.chunk, s.position))
    groups: List[str] = []
    text, chunk = "", None
    for s in ordered:
        if s.chunk != chunk and chunk is not None:
            groups.append(f"{text} [{chunk + 1}]")
            text = ""
        text = s.text if not text else _join(text, s.text)
        chunk = s.chunk
    if chunk is not None:
        groups.append(f"{text} [{chunk + 1}]")
    return " ".join(groups)
