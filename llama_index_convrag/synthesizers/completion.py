"""A short answer shown as its passage writes it: "2015" where the passage says "April 29, 2015", "10,000" where it
says "$10,000", "斯皮尔伯格" where it says "史蒂文·斯皮尔伯格".

A small model answering a factoid question often copies only part of the passage's expression: the year of a full
date, the figure without its currency or unit, the surname of a full name. :func:`complete_answer` finds the short
answer (:func:`answer_core`: at most :data:`SHORT_WORDS` words or :data:`SHORT_CJK` Chinese characters, one clause)
in the passages and widens it to the whole expression around it there (:func:`widen`: a date's month and day, a
currency sign, a unit, the given name before a surname joined by "·"; where a Chinese given name begins is read from
at most four characters, stopping at a one-character function word such as 是). Of the places the answer occurs, the
one whose sentence shares the most terms with the question is taken, one that widens preferred among those sharing at
least :data:`NEAR_SHARE` of the best; rank order breaks ties. A place whose sentence shares no term with the question
(a dateline) is never taken, and a name the question itself holds (its subject restated) is never widened; a year
the question holds may be ("2008年" for "2008年汶川地震的时间" is widened to the day). Nothing else of the answer changes, and an answer that
occurs nowhere, or nowhere widens, stays as it is. No LLM call.

It applies to ``citation_mode="aligned"`` answers (written without markers, then cited): a streamed one is held while
it could still be short (:class:`ShortHold`), so stream equals whole.
"""

from __future__ import annotations

import regex as re
from dataclasses import dataclass
from typing import AsyncIterator, Dict, Iterator, List, Optional, Sequence, Tuple

from llama_index_convrag.text import has_cjk
from llama_index_convrag.synthesizers.citations import strip_markers
from llama_index_convrag.synthesizers.sentences import terms_of
from llama_index_convrag.synthesizers.streams import afiltered_stream, filtered_stream

SHORT_WORDS = 5
"""An answer of at most this many words (no Chinese) may be widened."""
SHORT_CJK = 10
"""An answer with Chinese characters may be widened when it has at most this many characters."""
NEAR_SHARE = 0.5
"""A place that widens is taken over the best-matching one that does not when its sentence shares at least this share
of the best one's question terms."""

_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
          r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?")
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_JOIN = r"[·•・]"
_FUNCTION = "是的由和与在为被将把对向从及了"  # one-character words that may end the text before a name
#: (what the answer must start with, what may stand right before it in the passage).
_LEFT: Tuple[Tuple[re.Pattern, re.Pattern], ...] = (
    (re.compile(r"^\d{4}\b"),
     re.compile(rf"(?:\b{_MONTH}\s+{_DAY},?\s+|\b{_DAY}\s+{_MONTH},?\s+|\b{_MONTH},?\s+)$")),
    (re.compile(r"^\d"), re.compile(r"(?:US\$|A\$|C\$|HK\$|\$|€|£|¥|￥)$")),
    (re.compile(r"^\p{Han}"), re.compile(rf"(?:(?![{_FUNCTION}])\p{{Han}}){{1,4}}{_JOIN}$")),
)
#: (what the answer must end with, what may follow it in the passage).
_RIGHT: Tuple[Tuple[re.Pattern, re.Pattern], ...] = (
    (re.compile(r"\d{4}年?$"), re.compile(r"年?\d{1,2}月(?:\d{1,2}日)?")),
    (re.compile(rf"(?:\b{_MONTH}\s+{_DAY}|\b{_DAY}\s+{_MONTH}|\b{_MONTH})$"), re.compile(r",?\s+\d{4}\b")),
    (re.compile(r"\d$"),
     re.compile(r"(?:\s?[%‰]|\s(?:percent|per cent|million|billion|trillion)\b|万|亿|元|美元|级)")),
)  # not the name after a "·": Chinese has no word boundary to tell where it ends
_CLAUSE_END = re.compile(r"[.!?;]\s+\S|[。！？；]\s*\S|\n")
_SENTENCE_END = re.compile(r"[.!?。！？\n]")
_TRIM = " \t\n.。!！?？,，:：;；\"'“”‘’"


@dataclass(frozen=True)
class Completion:
    """``answer`` (as the model wrote it) widened to ``shown``, the expression of passage ``passage`` (1-based)."""

    answer: str
    shown: str
    passage: int

    def to_dict(self) -> Dict[str, object]:
        return {"answer": self.answer, "shown": self.shown, "passage": self.passage}


def answer_core(answer: str) -> Optional[str]:
    """The short answer's text (its ``[n]`` markers, outer quotes and end punctuation off), or None when the answer
    is not short: over :data:`SHORT_WORDS` words (:data:`SHORT_CJK` characters with Chinese), or more than one
    clause."""
    core = strip_markers(answer).strip(_TRIM)
    if not core or _CLAUSE_END.search(core):
        return None
    if has_cjk(core):
        return core if len(core) <= SHORT_CJK else None
    return core if len(core.split()) <= SHORT_WORDS else None


def could_be_short(text: str) -> bool:
    """Whether a stream's text so far may still turn out a short answer (:func:`answer_core`)."""
    core = strip_markers(text).strip(_TRIM)
    if _CLAUSE_END.search(core):
        return False
    return len(core) <= SHORT_CJK if has_cjk(core) else len(core.split()) <= SHORT_WORDS


def widen(passage: str, start: int, end: int) -> Tuple[int, int]:
    """``passage[start:end]`` widened to the whole expression around it (a date, an amount, a joined name)."""
    core = passage[start:end]
    for head, before in _LEFT:
        found = before.search(passage, 0, start) if head.search(core) else None
        if found is not None:
            start = found.start()
            break
    for tail, after in _RIGHT:
        found = after.match(passage, end) if tail.search(core) else None
        if found is not None and found.end() > end:
            end = found.end()
            break
    return start, end


def _sentence_around(passage: str, start: int, end: int) -> str:
    left = max((m.end() for m in _SENTENCE_END.finditer(passage, 0, start)), default=0)
    right = _SENTENCE_END.search(passage, end)
    return passage[left : right.end() if right is not None else len(passage)]


def _places(core: str, passages: Sequence[str]) -> List[Tuple[int, int, int]]:
    """``(passage, start, end)`` of every occurrence of ``core``, in rank order."""
    out = []
    for i, passage in enumerate(passages):
        pos = passage.find(core)
        while pos >= 0:
            out.append((i, pos, pos + len(core)))
            pos = passage.find(core, pos + 1)
    return out


def complete_span(answer: str, passages: Sequence[str], question: str) -> Optional[Completion]:
    """How a short answer widens (:mod:`module docs <llama_index_convrag.synthesizers.completion>`), or None."""
    core = answer_core(answer)
    if core is None or (core in question and not any(ch.isdigit() for ch in core)):
        return None  # a name the question holds is its subject restated, not an answer (a year may be widened)
    asked = frozenset(terms_of(question))
    scored = []
    for i, start, end in _places(core, passages):
        shared = len(asked & frozenset(terms_of(_sentence_around(passages[i], start, end))))
        scored.append((shared, i, widen(passages[i], start, end)))
    if not scored:
        return None
    best = max(shared for shared, _, _ in scored)
    wide = [(shared, i, span) for shared, i, span in scored
            if span[1] - span[0] > len(core) and shared > 0 and shared >= NEAR_SHARE * best]
    if not wide:
        return None
    shared, i, (start, end) = max(wide, key=lambda item: (item[0], -item[1]))
    return Completion(core, passages[i][start:end], i + 1)


def complete_answer(answer: str, passages: Sequence[str], question: str) -> Tuple[str, Optional[Completion]]:
    """``answer`` with its short answer widened (:func:`complete_span`), and how; else ``answer`` and None."""
    done = complete_span(answer, passages, question)
    if done is None:
        return answer, None
    return answer.replace(done.answer, done.shown, 1), done


COMPLETION_KEY = "completion"
"""``response.metadata`` key of a widened answer's :meth:`Completion.to_dict` (absent when none was)."""


class ShortHold:
    """Holds a stream while it may still be a short answer (:func:`could_be_short`), so that a widened one is shown
    whole; the first delta that makes it longer passes everything held. A :class:`~.streams.DeltaFilter`; a widening
    is written to ``metadata[COMPLETION_KEY]`` at the end."""

    def __init__(self, passages: Sequence[str], question: str, metadata: Dict[str, object]) -> None:
        self.passages = list(passages)
        self.question = question
        self.metadata = metadata
        self._held = ""
        self._open = False

    def feed(self, delta: str) -> str:
        if self._open:
            return delta
        self._held += delta
        if could_be_short(self._held):
            return ""
        self._open, out, self._held = True, self._held, ""
        return out

    def flush(self) -> str:
        held, self._held = self._held, ""
        if self._open or not held:
            return held
        text, done = complete_answer(held, self.passages, self.question)
        if done is not None:
            self.metadata[COMPLETION_KEY] = done.to_dict()
        return text


def completed_stream(deltas: Iterator[str], passages: Sequence[str], question: str,
                     metadata: Dict[str, object]) -> Iterator[str]:
    """``deltas`` with a short answer widened at the end (:class:`ShortHold`)."""
    return filtered_stream(deltas, ShortHold(passages, question, metadata))


def acompleted_stream(deltas: AsyncIterator[str], passages: Sequence[str], question: str,
                      metadata: Dict[str, object]) -> AsyncIterator[str]:
    """Async twin of :func:`completed_stream`."""
    return afiltered_stream(deltas, ShortHold(passages, question, metadata))


__all__ = ["COMPLETION_KEY", "NEAR_SHARE", "SHORT_CJK", "SHORT_WORDS", "Completion", "ShortHold", "acompleted_stream",
           "answer_core", "complete_answer", "complete_span", "completed_stream", "could_be_short", "widen"]
