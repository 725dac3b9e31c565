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
record's summary; :func:`cite_sentences` appends ``[n]`` (the best supporting passage, 1-based as
``citations=True`` numbers them) to each supported sentence of an answer that has no markers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from llama_index_convrag.synthesizers import sentences as S
from llama_index_convrag.synthesizers.citations import has_answer_text, strip_markers

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
    passage_terms = [_terms(p) for p in passages]
    judged = (judge_sentence(i, s, passages, passage_terms) for i, s in enumerate(S.split_sentences(answer)))
    return [j for j in judged if j is not None]


def grounding_record(answer: str, passages: Sequence[str]) -> Dict[str, Any]:
    """The turn record's ``grounding``: ``method``, ``support_share``, ``judged`` (sentences judged) and
    ``unsupported``: ``{"sentence", "text", "best_source", "overlap"}`` per sentence no passage supports
    (``best_source``: the 1-based marker of the closest passage, or None)."""
    judged = check_grounding(answer, passages)
    return {
        "method": METHOD, "support_share": SUPPORT_SHARE, "judged": len(judged),
        "unsupported": [{"sentence": j.index, "text": j.text, "best_source": None if j.source is None else j.source + 1,
                         "overlap": j.overlap} for j in judged if not j.supported],
    }


def cite_sentences(answer: str, passages: Sequence[str]) -> str:
    """``answer`` (written without markers) as its sentences, each supported one followed by `` [n]``, the best
    supporting passage (1-based); unsupported and unjudged sentences stay uncited. Sentences are joined by one
    space (none after Chinese end punctuation), as the extractive answer joins them."""
    passage_terms = [_terms(p) for p in passages]
    out: List[str] = []
    for i, sentence in enumerate(S.split_sentences(answer)):
        judged = judge_sentence(i, sentence, passages, passage_terms)
        text = sentence
        if judged is not None and judged.supported and judged.source is not None:
            text = _cite(sentence, judged.source + 1)
        out.append(text)
    joined = ""
    for piece in out:
        joined = piece if not joined else (joined + piece if joined[-1] in "。！？" else f"{joined} {piece}")
    return joined


def _cite(sentence: str, marker: int) -> str:
    """``sentence`` with `` [marker]`` before its end punctuation ("It opened in 1889 [1].", "开幕了[1]。")."""
    body = sentence.rstrip()
    end = len(body)
    while end > 0 and (body[end - 1] in ".!?。！？" or body[end - 1] in S.CLOSERS):
        end -= 1
    space = "" if end and not body[end - 1].isascii() else " "
    return f"{body[:end]}{space}[{marker}]{body[end:]}"


__all__ = ["METHOD", "MIN_TERMS", "SUPPORT_SHARE", "SentenceSupport", "check_grounding", "cite_sentences",
           "grounding_record", "judge_sentence"]
