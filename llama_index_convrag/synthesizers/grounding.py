"""Grounding, cheaply: which answer sentences no passage supports, and citations for an answer written without them.

No LLM call. An answer is split into sentences (``sentences.split_sentences``: English and Chinese punctuation) and
each sentence, its ``[n]`` markers removed, is compared with every passage by its content terms
(``sentences.terms_of``: stemmed words less stop words, Chinese character bigrams):

* **overlap** with a passage: the share of the sentence's distinct terms the passage holds;
* a passage **supports** the sentence when the overlap is at least :data:`SUPPORT_SHARE` and every number the
  sentence states ("1889", "12") appears in the passage (a right topic with a wrong figure is not support);
* a sentence with fewer than :data:`MIN_TERMS` terms ("Yes.") or one that says the passages do not answer ("The
  context does not mention it.", "没有提到") is not judged.

:func:`check_grounding` gives one :class:`SentenceSupport` per judged sentence; :func:`grounding_record` the turn
record's summary; :func:`cite_sentences` inserts ``[n]`` (the best supporting passage, 1-based as
``citations=True`` numbers them) after each supported sentence of an answer written without markers (the
``citation_mode="aligned"`` answers and the engine's retry). :func:`cite_judged` does both at once: it cites and
returns every sentence's judgment, so an aligned answer is judged once (a stream is cited sentence by sentence by
:class:`~llama_index_convrag.synthesizers.stream_hold.StreamHold`, which keeps the judgments for the record).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from llama_index_convrag.synthesizers import sentences as S
from llama_index_convrag.synthesizers.citations import MARKER_RE, has_answer_text, strip_markers

#: A passage supports a sentence that shares at least this share of its distinct content terms (and its numbers).
SUPPORT_SHARE = 0.5
#: Sentences with fewer content terms are not judged (too little to compare).
MIN_TERMS = 2
METHOD = "lexical"
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
#: A sentence saying the passages hold no answer: a refusal, not a claim to check.
_REFUSAL = re.compile(
    r"\b(?:do(?:es)?n[o']?t know|do(?:es)? not (?:know|mention|say|state|contain|provide|specify)|"
    r"(?:is|are) not (?:mentioned|stated|provided|specified)|no (?:information|mention)|"
    r"cannot (?:answer|find|be determined)|can't (?:answer|find)|not (?:enough|sufficient) information)\b"
    r"|不知道|没有提到|未提及|没有提及|无法回答|无法确定|没有相关信息|未提供",
    re.IGNORECASE)


@dataclass(frozen=True)
class SentenceSupport:
    """One judged answer sentence: its position among the answer's sentences, its text (as written, markers
    included), the best passage (0-based, None when no passage shares a term), that passage's overlap, and whether
    it supports the sentence."""

    index: int
    text: str
    source: Optional[int]
    overlap: float
    supported: bool


def _numbers(text: str) -> List[str]:
    return [n.replace(",", "") for n in _NUMBER.findall(text)]


def _terms(text: str) -> FrozenSet[str]:
    return frozenset(S.terms_of(text))


def _overlap(terms: FrozenSet[str], passage: str, passage_terms: FrozenSet[str]) -> float:
    held = sum(1 for t in terms if t in passage_terms or (not t.isascii() and t in passage))
    return held / len(terms)


def _supports(numbers: Sequence[str], passage: str, overlap: float) -> bool:
    plain = passage.replace(",", "")
    return overlap >= SUPPORT_SHARE and all(n in plain for n in numbers)


def judge_sentence(index: int, sentence: str, passages: Sequence[str],
                   passage_terms: Sequence[FrozenSet[str]]) -> Optional[SentenceSupport]:
    """The :class:`SentenceSupport` of one sentence, None when it is not judged (too short, a refusal, markers
    only). The best passage is the first supporting one of highest overlap, else the one of highest overlap."""
    claim = strip_markers(sentence)
    terms = _terms(claim)
    if not has_answer_text(sentence) or len(terms) < MIN_TERMS or _REFUSAL.search(claim):
        return None
    numbers = _numbers(claim)
    best: Tuple[bool, float] = (False, 0.0)
    source: Optional[int] = None
    for i, (passage, held) in enumerate(zip(passages, passage_terms)):
        overlap = _overlap(terms, passage, held)
        key = (_supports(numbers, passage, overlap), overlap)
        if overlap > 0 and key > best:
            best, source = key, i
    return SentenceSupport(index, sentence, source, round(best[1], 3), best[0])


def check_grounding(answer: str, passages: Sequence[str]) -> List[SentenceSupport]:
    """Every judged sentence of ``answer`` against ``passages`` (see the module docstring), in answer order."""
    passage_terms = passage_terms_of(passages)
    judged = (judge_sentence(i, s, passages, passage_terms) for i, s in enumerate(S.split_sentences(answer)))
    return [j for j in judged if j is not None]


def grounding_record(answer: str, passages: Sequence[str]) -> Dict[str, Any]:
    """The turn record's ``grounding``: ``method``, ``support_share``, ``judged`` (sentences judged) and
    ``unsupported``: ``{"sentence", "text", "best_source", "overlap"}`` per sentence no passage supports
    (``best_source``: the 1-based marker of the closest passage, or None)."""
    return grounding_of(check_grounding(answer, passages))


def grounding_of(judged: Sequence[SentenceSupport]) -> Dict[str, Any]:
    """:func:`grounding_record` of sentences judged already (:func:`check_grounding`, :func:`cite_judged`)."""
    return {
        "method": METHOD, "support_share": SUPPORT_SHARE, "judged": len(judged),
        "unsupported": [{"sentence": j.index, "text": j.text, "best_source": None if j.source is None else j.source + 1,
                         "overlap": j.overlap} for j in judged if not j.supported],
    }


def passage_terms_of(passages: Sequence[str]) -> List[FrozenSet[str]]:
    """Each passage's content terms (computed once per answer; cached by text, so a chunk retrieved again, by a
    follow-up or by another conversation, is not read again)."""
    return [_passage_terms(p) for p in passages]


PASSAGE_TERMS_CACHE = 4096
"""Passages whose terms :func:`passage_terms_of` keeps (least recently used dropped first)."""


@lru_cache(maxsize=PASSAGE_TERMS_CACHE)
def _passage_terms(passage: str) -> FrozenSet[str]:
    return _terms(passage)


#: Characters without which a text is one sentence (``sentences.split_sentences`` ends a sentence at end punctuation
#: or at a line break: a blank line, a table row, a heading or a list item).
_MAY_END = re.compile(r"[.!?。！？\n]")


def _sentence_spans(text: str) -> List[Tuple[int, int, str]]:
    """``(start, end, sentence)`` of each sentence of ``text`` (``sentences.split_sentences``) in ``text`` itself:
    a sentence is ``text``'s words, whitespace normalised, so its words are searched with any whitespace between."""
    spans: List[Tuple[int, int, str]] = []
    pos = 0
    for sentence in S.split_sentences(text):
        found = re.compile(r"\s+".join(re.escape(w) for w in sentence.split())).search(text, pos)
        if found is not None:
            spans.append((found.start(), found.end(), sentence))
            pos = found.end()
    return spans


def citing_source(index: int, sentence: str, passages: Sequence[str],
                  passage_terms: Sequence[FrozenSet[str]]) -> Optional[int]:
    """The passage (0-based) a sentence is cited with: the best supporting one (:func:`judge_sentence`); for a short
    answer too small to judge ("70", "Tampa Bay."), the first passage holding all of its terms and numbers; else
    None."""
    return source_for(judge_sentence(index, sentence, passages, passage_terms), sentence, passages, passage_terms)


def source_for(judged: Optional[SentenceSupport], sentence: str, passages: Sequence[str],
               passage_terms: Sequence[FrozenSet[str]]) -> Optional[int]:
    """:func:`citing_source` of a sentence whose judgment (:func:`judge_sentence`) is ``judged``."""
    if judged is not None:
        return judged.source if judged.supported else None
    claim = strip_markers(sentence)
    terms = _terms(claim)
    if not terms or _REFUSAL.search(claim):
        return None
    numbers = _numbers(claim)
    return next((i for i, (p, held) in enumerate(zip(passages, passage_terms))
                 if _overlap(terms, p, held) == 1.0 and _supports(numbers, p, 1.0)), None)


def insert_markers(text: str, passages: Sequence[str], passage_terms: Sequence[FrozenSet[str]]) -> str:
    """``text`` as written (its line breaks and spacing kept), `` [n]`` inserted before the end punctuation of each
    sentence a passage supports (``n``: :func:`citing_source`, 1-based); a sentence that holds a marker already
    (the model wrote one anyway) is left as it is."""
    return cite_judged(text, passages, passage_terms)[0]


def cite_judged(text: str, passages: Sequence[str], passage_terms: Sequence[FrozenSet[str]],
                first: int = 0) -> Tuple[str, List[SentenceSupport], int]:
    """``text`` cited as :func:`insert_markers` cites it, with the judgment of each of its sentences that is judged
    (:func:`judge_sentence`; sentence indices counted from ``first``) and the number of sentences read: the grounding
    record of an aligned answer comes from these (:func:`grounding_of`), not from a second pass."""
    out: List[str] = []
    judged: List[SentenceSupport] = []
    pos = 0
    spans = _sentence_spans(text)
    for i, (start, end, sentence) in enumerate(spans, start=first):
        verdict = judge_sentence(i, sentence, passages, passage_terms)
        if verdict is not None:
            judged.append(verdict)
        source = None if MARKER_RE.search(sentence) else source_for(verdict, sentence, passages, passage_terms)
        if source is not None:
            out.append(text[pos:start] + _cite(text[start:end], source + 1))
            pos = end
    out.append(text[pos:])
    return "".join(out), judged, len(spans)


def cite_sentences(answer: str, passages: Sequence[str]) -> str:
    """``answer`` (written without markers) with each sentence that a passage supports followed by `` [n]``
    (:func:`citing_source`; 1-based, as ``citations=True`` numbers them); the other sentences stay uncited. Nothing
    else of the answer changes (:func:`insert_markers`)."""
    return insert_markers(answer, passages, passage_terms_of(passages))


def _body_end(text: str, start: int) -> int:
    """The end of ``text``'s last letter or digit (at least ``start``): what follows it (end punctuation, closing
    quotes, blanks, the ``-`` or ``|`` that may begin a list item or a table row) waits, since a marker may go
    before it."""
    end = len(text)
    while end > start and not text[end - 1].isalnum():
        end -= 1
    return end


def _cite(sentence: str, marker: int) -> str:
    """``sentence`` with `` [marker]`` before its end punctuation ("It opened in 1889 [1].", "开幕了[1]。")."""
    body = sentence.rstrip()
    end = len(body)
    while end > 0 and (body[end - 1] in ".!?。！？" or body[end - 1] in S.CLOSERS):
        end -= 1
    space = "" if end and not body[end - 1].isascii() else " "
    return f"{body[:end]}{space}[{marker}]{body[end:]}"


__all__ = ["METHOD", "MIN_TERMS", "SUPPORT_SHARE", "SentenceSupport", "check_grounding", "cite_judged",
           "cite_sentences", "citing_source", "grounding_of", "grounding_record", "insert_markers", "judge_sentence",
           "passage_terms_of", "source_for"]
