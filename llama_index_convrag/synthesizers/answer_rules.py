"""What the extractive answer's scoring may be tuned by: the answer types a question asks for, the cue phrases that
tell them, and every weight and share of the score, as one typed value (:class:`AnswerRules`).

Cue phrases are words, not patterns: a phrase matches where its words follow each other among the question's
words, a Chinese cue where the question holds it (:func:`llama_index_convrag.text.holds_phrase`). Each field's
docstring names the measurement that chose it: ``bench/answer_rules.py``
prints the extractive answer's containment with each rule off or set otherwise, per set (RGB English, RGB Chinese,
CANARD, man pages) and per half of its questions.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import FrozenSet, Tuple

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.text import holds_phrase


class AnswerType(str, Enum):
    """The kind of answer a question asks for."""

    WHO = "who"
    """A person's, a group's or a titled work's name."""
    WHEN = "when"
    """A date or a time."""
    WHERE = "where"
    """A place."""
    COUNT = "count"
    """An amount: a number, a size, a duration."""
    OTHER = "other"
    """Anything else: an account, a way to do something, what something is (their answers hold no evidence of a
    kind a rule can see: ``bench/answer_rules.py`` measured how-to and definition types, and neither moved a
    figure); and every question in a language the rules do not support."""


Cues = Tuple[Tuple[AnswerType, Tuple[str, ...]], ...]


@dataclass(frozen=True)
class AnswerRules:
    """The extractive answer's tunables (checked once, here); the defaults are the measured settings. Every figure
    below is ``bench/answer_rules.py``: contained / counted, RGB English 91, RGB Chinese 156, CANARD 94, man pages
    15 (first half / second half); the default contains 78 (37 / 41), 136 (67 / 69), 77 (34 / 43), 15 (7 / 8)."""

    cues: Cues = (
        (AnswerType.COUNT, ("how many", "how much", "how long", "how far", "how old", "how big", "how tall",
                            "how high", "number of", "多少", "几")),
        (AnswerType.WHEN, (
            "when did", "when was", "when were", "when is", "when are", "when does", "when do", "when will",
            "when would", "when has", "when have", "when had", "when could", "when can", "know when", "tell me when",
            "remember when", "find out when", "wonder when", "what year", "what date", "what day", "what month",
            "what time", "which year", "which date", "which day", "date", "dates",
            "何时", "什么时候", "哪年", "哪一年", "哪天", "哪一天", "哪月", "哪一月", "日期", "时间")),
        (AnswerType.WHO, ("who", "whom", "whose", "谁", "哪位")),
        (AnswerType.WHERE, ("where", "location", "which city", "which country", "which place", "which state",
                            "哪里", "在哪", "哪个城市", "哪个国家", "哪个地方", "地点")),
    )
    """Per answer type, in order (the first type with a cue in the question wins), its cue phrases. Measured:
    ``bench/answer_rules.py`` with no cues (every question ``other``), RGB English contains 73 (35 / 38) instead of 78 (37 / 41); the how-to and
    definition types, the opening "when" and "which actor" asking ``who`` moved no figure and are gone."""
    w_terms: float = 1.0
    """Weight of the question's terms a sentence holds (IDF-weighted share). Measured: the unit the other weights of
    ``bench/answer_rules.py`` are set against."""
    w_embed: float = 0.8
    """Weight of the embedding similarity of the shortlisted sentences. Measured: ``bench/answer_rules.py`` at 0,
    CANARD 71 (31 / 40) against 77 (34 / 43)."""
    w_type: float = 0.4
    """Weight of the answer type's evidence in a sentence on the question's terms. Measured: ``bench/answer_rules.py``
    at 0, RGB English 73 (35 / 38) against 78 (37 / 41)."""
    w_rank: float = 0.2
    """Weight of the passage's rank, ``w_rank / (rank + 1)``. Measured: ``bench/answer_rules.py`` at 0, RGB English
    76 (35 / 41), RGB Chinese 132 (63 / 69), CANARD 75 (32 / 43)."""
    context_share: float = 0.5
    """A sentence borrows this share of the term overlap of the sentence before it in its passage: an answer often
    follows the sentence naming its subject. Measured: ``bench/answer_rules.py`` at 0, CANARD 71 (33 / 38), RGB
    English 76 (36 / 40)."""
    keep_share: float = 0.6
    """A sentence off the question's terms (an unrelated passage) is quoted only when it scores at least this share
    of the best. Measured: ``bench/answer_rules.py`` at 0.5, every figure the same; 0.0 pads answers
    (docs/results/newcomer.md)."""
    open_share: float = 0.3
    """The share a sentence on the question's terms needs: an answer is often told over several sentences.
    Measured: ``bench/answer_rules.py`` at 0.6, CANARD 68 (30 / 38) against 77 (34 / 43); one share for factoid and
    other questions moved no figure."""
    evidence_types: FrozenSet[AnswerType] = frozenset({AnswerType.WHEN, AnswerType.WHERE, AnswerType.COUNT})
    """The types whose answer must hold its kind's evidence (a date, a place, a number) when a shortlisted sentence
    does. Measured: ``bench/answer_rules.py`` with none, RGB English 76 (36 / 40); with ``who`` too, RGB Chinese
    132 (65 / 67)."""
    who_single: float = 0.5
    """The ``who`` evidence of a single capitalised word; a full name counts 1. Measured: ``bench/answer_rules.py``
    at 1, RGB English 77 (37 / 40), RGB Chinese 133 (65 / 68)."""
    date_thirds: bool = True
    """``when`` evidence counts a third per part of a date (a year, a month, a day with its month), so a full date
    outranks a year alone. Measured: ``bench/answer_rules.py`` off, RGB English 76 (35 / 41)."""
    reserve_evidence: bool = True
    """Up to half of the embedded sentences are the best of those holding the whole evidence of a typed question's
    answer (a full name, a full date), whatever words they share with it. Measured: ``bench/answer_rules.py`` off
    (the ``reserve_evidence off`` row)."""
    embed_cap: int = 4
    """Sentences embedded per answer: the best by the cheap scores. Measured: ``bench/answer_rules.py`` at 8, RGB
    English 77 (36 / 41), RGB Chinese 133 (66 / 67), CANARD 79 (34 / 44): no better overall, twice the embedding."""
    embed_chars: int = 400
    """Characters of a sentence embedded (a long run-together line is judged by its start). Measured:
    ``bench/answer_rules.py``, 400 / 128 against 200 / 64: RGB Chinese 136 (67 / 69) against 134 (66 / 68), the
    other sets the same."""
    embed_cjk_chars: int = 128
    """Characters of a CJK sentence embedded (a CJK character is about one word piece). Measured: with
    ``embed_chars`` (``bench/answer_rules.py``)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("float",) and (isinstance(value, bool) or not isinstance(value, (int, float))
                                         or not value >= 0):
                raise ConfigurationError(f"{f.name} must be a number >= 0, got {value!r}")
            if f.type == "int" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"{f.name} must be an int >= 1, got {value!r}")
        for name in ("keep_share", "open_share", "context_share", "who_single"):
            if getattr(self, name) > 1:
                raise ConfigurationError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        bad = [t for t in self.evidence_types if not isinstance(t, AnswerType)]
        if bad:
            raise ConfigurationError(f"evidence_types must hold AnswerType values ({[t.value for t in AnswerType]}), "
                                     f"got {bad!r}")
        for kind, phrases in self.cues:
            if not isinstance(kind, AnswerType) or isinstance(phrases, str):
                raise ConfigurationError(f"cues must be (AnswerType, tuple of phrases) pairs, got {(kind, phrases)!r}")
        for name in ("date_thirds", "reserve_evidence"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{name} must be a bool, got {getattr(self, name)!r}")


DEFAULT_ANSWER_RULES = AnswerRules()


def answer_type(question: str, rules: AnswerRules = DEFAULT_ANSWER_RULES) -> AnswerType:
    """The :class:`AnswerType` ``question`` asks for, by ``rules.cues`` (see the module docstring)."""
    for kind, phrases in rules.cues:
        if any(holds_phrase(question, p) for p in phrases):
            return kind
    return AnswerType.OTHER


__all__ = ["AnswerRules", "AnswerType", "DEFAULT_ANSWER_RULES", "answer_type"]
