"""A short answer shown as its passage writes it: "2015" where the passage says "April 29, 2015", "10,000" where it
says "$10,000", "斯皮尔伯格" where it says "史蒂文·斯皮尔伯格".

A small model answering a factoid question often copies only part of the passage's expression: the year of a full
date, the figure without its currency or unit, the surname of a full name. :func:`complete_answer` finds the short
answer (:func:`answer_core`: at most ``short_words`` words or ``short_cjk`` Chinese characters, one sentence:
:class:`CompletionRules`)
in the passages and widens it to the whole expression around it there (:func:`widen`: a date's month and day, a
currency sign, a unit, the given name before a surname joined by "·"; where a Chinese given name begins is read from
at most four characters, stopping at a one-character function word such as 是). Of the places the answer occurs, the
one whose sentence shares the most terms with the question is taken, one that widens preferred among those sharing at
least ``near_share`` of the best; rank order breaks ties. A place whose sentence shares no term with the question
(a dateline) is never taken, and a name the question itself holds (its subject restated) is never widened; a year
the question holds may be ("2008年" for "2008年汶川地震的时间" is widened to the day). Nothing else of the answer changes, and an answer that
occurs nowhere, or nowhere widens, stays as it is. No LLM call.

It applies to ``citation_mode="aligned"`` answers (written without markers, then cited): a streamed one is held while
it could still be short (:func:`could_be_short`; :class:`~llama_index_convrag.synthesizers.stream_hold.StreamHold`), so
stream equals whole.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import regex as re

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.text import HAN, has_cjk, month_names, sentence_spans, split_sentences
from llama_index_convrag.synthesizers.citations import strip_markers
from llama_index_convrag.synthesizers.sentences import terms_of



@dataclass(frozen=True)
class CompletionRules:
    """When a short answer is widened (checked once, here)."""

    short_words: int = 5
    """An answer of at most this many words (no Chinese) may be widened: RGB English gold answers are at most 5
    words in 46 of the first 50 questions (``bench/real_answers.py``, the ``widened`` column)."""
    short_cjk: int = 10
    """An answer with Chinese characters may be widened when it has at most this many characters (the same for RGB
    Chinese). Measured: ``bench/real_answers.py`` (the ``widened`` column, RGB Chinese)."""
    near_share: float = 0.5
    """A place that widens is taken over the best-matching one that does not when its sentence shares at least this
    share of the best one's question terms (``tests/synthesizers/test_completion.py``: a date of another event
    far from the question is not taken)."""

    def __post_init__(self) -> None:
        for name in ("short_words", "short_cjk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")
        share = self.near_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            raise ConfigurationError(f"near_share must be a number in [0, 1], got {share!r}")


DEFAULT_COMPLETION_RULES = CompletionRules()
_MONTH = "(?:" + "|".join(month_names("en")) + r")\.?"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
#: Before a year: a month and a day ("April 29, "), a day and a month ("29 April "), or a month ("December ").
_BEFORE_YEAR = re.compile(rf"(?:\b{_MONTH}\s+{_DAY},?\s+|\b{_DAY}\s+{_MONTH},?\s+|\b{_MONTH},?\s+)$", re.I)
#: Before a Chinese surname: a given name of one to four characters joined by a middle dot ("史蒂文·"), not starting
#: after a one-character function word (是, 的, 由 ...).
_BEFORE_SURNAME = re.compile(r"(?:(?![是的由和与在为被将把对向从及了])\p{Han}){1,4}[·•・]$")
#: After a year: its month and day (年5月12日).
_AFTER_YEAR = re.compile(r"年?\d{1,2}月(?:\d{1,2}日)?")
#: After a month or a month and day: the year (", 2015").
_AFTER_DAY = re.compile(r",?\s+\d{4}\b")
#: After a number: its unit (%, percent, million, 万, 亿, 元, 级).
_AFTER_NUMBER = re.compile(r"(?:\s?[%‰]|\s(?:percent|per cent|million|billion|trillion)\b|万|亿|元|美元|级)")
_ENDS_WITH_DATE = re.compile(rf"(?:\b{_MONTH}\s+{_DAY}|\b{_DAY}\s+{_MONTH}|\b{_MONTH})$", re.I)
_TRIM = " \t\n.。!！?？,，:：;；\"'“”‘’"


@dataclass(frozen=True)
class Completion:
    """``answer`` (as the model wrote it) widened to ``shown``, the expression of passage ``passage`` (1-based)."""

    answer: str
    shown: str
    passage: int

    def to_dict(self) -> Dict[str, object]:
        return {"answer": self.answer, "shown": self.shown, "passage": self.passage}


def _is_short(core: str, rules: CompletionRules) -> bool:
    if not core or len(split_sentences(core)) > 1 or "\n" in core:
        return False
    return len(core) <= rules.short_cjk if has_cjk(core) else len(core.split()) <= rules.short_words


def answer_core(answer: str, rules: CompletionRules = DEFAULT_COMPLETION_RULES) -> Optional[str]:
    """The short answer's text (its ``[n]`` markers, outer quotes and end punctuation off), or None when the answer
    is not short: over ``rules.short_words`` words (``rules.short_cjk`` characters with Chinese), or more than one
    sentence."""
    core = strip_markers(answer).strip(_TRIM)
    return core if _is_short(core, rules) else None


def could_be_short(text: str, rules: CompletionRules = DEFAULT_COMPLETION_RULES) -> bool:
    """Whether a stream's text so far may still turn out a short answer (:func:`answer_core`)."""
    core = strip_markers(text).strip(_TRIM)
    return not core or _is_short(core, rules)


def _is_year(text: str) -> bool:
    return len(text) >= 4 and text[:4].isdigit() and (len(text) == 4 or not text[4].isalnum())


def widen(passage: str, start: int, end: int) -> Tuple[int, int]:
    """``passage[start:end]`` widened to the whole expression around it (a date, an amount, a joined name)."""
    core = passage[start:end]
    before = None
    if _is_year(core):
        before = _BEFORE_YEAR.search(passage, 0, start)
    if before is None and core[:1].isdigit():
        sign = start
        while sign and unicodedata.category(passage[sign - 1]) == "Sc":  # a currency sign: $, €, ¥
            sign -= 1
        while sign < start and sign and passage[sign - 1].isupper() and start - sign < 4:  # US$, HK$
            sign -= 1
        start = sign
    elif before is None and HAN.match(core):
        before = _BEFORE_SURNAME.search(passage, 0, start)
    if before is not None:
        start = before.start()
    year = core[:-1] if core.endswith("年") else core
    for applies, after in ((len(year) >= 4 and year[-4:].isdigit(), _AFTER_YEAR),
                           (_ENDS_WITH_DATE.search(core) is not None, _AFTER_DAY),
                           (core[-1:].isdigit(), _AFTER_NUMBER)):
        found = after.match(passage, end) if applies else None
        if found is not None and found.end() > end:
            return start, found.end()
    return start, end


def _sentence_around(passage: str, start: int, end: int) -> str:
    spans = sentence_spans(passage)
    return next((s for a, b, s in spans if a <= start < b), passage)


def _places(core: str, passages: Sequence[str]) -> List[Tuple[int, int, int]]:
    """``(passage, start, end)`` of every occurrence of ``core``, in rank order."""
    out = []
    for i, passage in enumerate(passages):
        pos = passage.find(core)
        while pos >= 0:
            out.append((i, pos, pos + len(core)))
            pos = passage.find(core, pos + 1)
    return out


def complete_span(answer: str, passages: Sequence[str], question: str,
                  rules: CompletionRules = DEFAULT_COMPLETION_RULES) -> Optional[Completion]:
    """How a short answer widens (:mod:`module docs <llama_index_convrag.synthesizers.completion>`), or None."""
    core = answer_core(answer, rules)
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
            if span[1] - span[0] > len(core) and shared > 0 and shared >= rules.near_share * best]
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


__all__ = ["COMPLETION_KEY", "DEFAULT_COMPLETION_RULES", "Completion", "CompletionRules", "answer_core",
           "complete_answer", "complete_span", "could_be_short", "widen"]
