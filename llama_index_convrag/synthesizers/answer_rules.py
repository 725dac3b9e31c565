"""What the extractive answer's scoring may be tuned by: the answer types a question asks for, the cue phrases that
tell them, and every weight and share of the score, as one typed value (:class:`AnswerRules`).

Cue phrases are words, not patterns: a phrase matches where its words follow each other among the question's
words, a Chinese cue where the question holds it (:func:`llama_index_convrag.text.holds_phrase`). A
noun of :attr:`AnswerRules.name_nouns` after "which" or "what" (at most one word between, any form the stemmer
folds) asks for a name. Each field's docstring names the measurement that chose it: ``bench/answer_rules.py``
prints the extractive answer's containment with each rule off or set otherwise, per set (RGB English, RGB Chinese,
CANARD, man pages) and per half of its questions.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import FrozenSet, Sequence, Tuple

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.text import holds_phrase, stem, words


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
    HOW_TO = "how-to"
    """A way to do something (an option, a command)."""
    DEFINITION = "definition"
    """What something is."""
    OTHER = "other"
    """Anything else (and every question in a language the rules do not support)."""


Cues = Tuple[Tuple[AnswerType, Tuple[str, ...]], ...]

@dataclass(frozen=True)
class AnswerRules:
    """The extractive answer's tunables (checked once, here); the defaults are the measured settings."""

    cues: Cues = (
        (AnswerType.COUNT, ("how many", "how much", "how long", "how far", "how old", "how big", "how tall",
                            "how high", "number of", "多少", "几")),
        (AnswerType.HOW_TO, ("how do", "how can", "how to", "how should", "how would", "which option",
                             "which flag", "which command", "如何", "怎么", "怎样")),
        (AnswerType.WHEN, (
            "when did", "when was", "when were", "when is", "when are", "when does", "when do", "when will",
            "when would", "when has", "when have", "when had", "when could", "when can", "^when", "know when", "tell me when", "remember when", "find out when", "wonder when", "what year", "what date",
            "what day", "what month", "what time", "which year", "which date", "which day", "date", "dates",
            "何时", "什么时候", "哪年", "哪一年", "哪天", "哪一天", "哪月", "哪一月", "日期", "时间")),
        (AnswerType.WHO, ("who", "whom", "whose", "谁", "哪位")),
        (AnswerType.WHERE, ("where", "location", "which city", "which country", "which place", "which state",
                            "哪里", "在哪", "哪个城市", "哪个国家", "哪个地方", "地点")),
        (AnswerType.DEFINITION, ("what is", "what are", "what does", "meaning of", "define", "是什么", "什么是")),
    )
    """Per answer type, in order (the first type with a cue in the question wins: "How do I keep the files when
    compressing?" asks how to), its cue phrases; ``^when``: the question opens with "when" and holds none of
    ``question_words`` after it (``bench/answer_rules.py``: the ``cues`` rows)."""
    name_nouns: Tuple[str, ...] = ("actor", "actress", "director", "player", "singer", "author", "writer", "person",
                                   "team", "company", "band", "artist", "president", "leader", "winner", "movie",
                                   "film", "song", "album", "book", "novel", "show", "game")
    """Nouns whose answer is a name: "which actor", "what movie" ask ``who`` (``bench/answer_rules.py``:
    ``name_nouns`` off)."""
    question_words: FrozenSet[str] = frozenset({"what", "who", "whom", "where", "how", "which", "why"})
    """The cue ``^when`` does not hold for a question with one of these after its "when" ("When the disk is full,
    what does gzip do?"): ``bench/answer_rules.py``, the ``cues`` rows."""
    w_terms: float = 1.0
    """Weight of the question's terms a sentence holds (IDF-weighted share): the score's unit. Measured: the unit the
    other weights are set against in ``bench/answer_rules.py``."""
    w_embed: float = 0.8
    """Weight of the embedding similarity of the shortlisted sentences (``bench/answer_rules.py``: ``w_embed``)."""
    w_type: float = 0.4
    """Weight of the answer type's evidence in a sentence on the question's terms (``bench/answer_rules.py``:
    ``w_type``)."""
    w_definition: float = 0.15
    """Bonus of a man-page definition line ("-a, --all ...") for a how-to, definition or other question
    (``bench/answer_rules.py``: ``w_definition``)."""
    w_rank: float = 0.2
    """Weight of the passage's rank, ``w_rank / (rank + 1)`` (``bench/answer_rules.py``: ``w_rank``)."""
    heading_penalty: float = 1.0
    """What a heading or a fragment under 12 characters loses: it names the topic, it does not answer
    (``bench/answer_rules.py``: ``heading_penalty``)."""
    context_share: float = 0.5
    """A sentence borrows this share of the term overlap of the sentence before it in its passage: an answer often
    follows the sentence naming its subject (``bench/answer_rules.py``: ``context_share``)."""
    keep_share: float = 0.6
    """A sentence is quoted when it scores at least this share of the best: a factoid question's, or a sentence off
    the question's terms (``bench/answer_rules.py``: ``keep_share``)."""
    open_share: float = 0.3
    """The share for a sentence on the question's terms answering a question that asks for an account (how, why,
    what is): its answer is told over several sentences (``bench/answer_rules.py``: ``open_share``)."""
    factoid_types: FrozenSet[AnswerType] = frozenset({AnswerType.WHO, AnswerType.WHEN, AnswerType.WHERE,
                                                      AnswerType.COUNT})
    """The types that ask for one fact, quoted at ``keep_share``. Measured: ``bench/answer_rules.py`` (``factoid_types
    none``)."""
    evidence_types: FrozenSet[AnswerType] = frozenset({AnswerType.WHEN, AnswerType.WHERE, AnswerType.COUNT})
    """The types whose answer must hold its kind's evidence (a date, a place, a number) when a shortlisted sentence
    does (``bench/answer_rules.py``: ``evidence_types``; ``who`` in it loses RGB Chinese turns)."""
    who_single: float = 0.5
    """The ``who`` evidence of a single capitalised word; a full name counts 1 (``bench/answer_rules.py``:
    ``who_single``)."""
    date_thirds: bool = True
    """``when`` evidence counts a third per part of a date (a year, a month, a day with its month), so a full date
    outranks a year alone (``bench/answer_rules.py``: ``date_thirds``)."""
    reserve_evidence: bool = True
    """Up to half of the embedded sentences are the best of those holding the whole evidence of a typed question's
    answer (a full name, a full date), whatever words they share with it ("Written by Richard M. Stallman" answers
    "Who wrote ls?": ``tests/synthesizers/test_extractive.py``; ``bench/answer_rules.py``: ``reserve_evidence off``)."""
    embed_cap: int = 4
    """Sentences embedded per answer: the best by the cheap scores (``bench/answer_rules.py``: ``embed_cap``)."""
    embed_chars: int = 200
    """Characters of a sentence embedded (a long run-together line is judged by its start). Measured:
    ``bench/answer_rules.py`` (``embed_chars 400``)."""
    embed_cjk_chars: int = 64
    """Characters of a CJK sentence embedded (a CJK character is about one word piece). Measured:
    ``bench/answer_rules.py`` (``embed_cjk_chars 128``)."""

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
        for name in ("factoid_types", "evidence_types"):
            bad = [t for t in getattr(self, name) if not isinstance(t, AnswerType)]
            if bad:
                raise ConfigurationError(f"{name} must hold AnswerType values ({[t.value for t in AnswerType]}), "
                                         f"got {bad!r}")
        for kind, phrases in self.cues:
            if not isinstance(kind, AnswerType) or isinstance(phrases, str):
                raise ConfigurationError(f"cues must be (AnswerType, tuple of phrases) pairs, got {(kind, phrases)!r}")
        for name in ("date_thirds", "reserve_evidence"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{name} must be a bool, got {getattr(self, name)!r}")


DEFAULT_ANSWER_RULES = AnswerRules()


def _has_cue(question: str, tokens: Sequence[str], phrase: str, rules: "AnswerRules") -> bool:
    if phrase.startswith("^"):  # the question opens with this word, and no other question word follows
        return tokens[:1] == [phrase[1:]] and not rules.question_words & set(tokens[1:])
    return holds_phrase(question, phrase)


def _asks_for_name(tokens: Sequence[str], nouns: FrozenSet[str]) -> bool:
    return any(t in ("which", "what") and any(stem(w) in nouns for w in tokens[i + 1 : i + 3])
               for i, t in enumerate(tokens))


def answer_type(question: str, rules: AnswerRules = DEFAULT_ANSWER_RULES) -> AnswerType:
    """The :class:`AnswerType` ``question`` asks for, by ``rules.cues`` (see the module docstring)."""
    tokens = words(question.lower())
    for kind, phrases in rules.cues:
        if any(_has_cue(question, tokens, p, rules) for p in phrases):
            return kind
        if kind is AnswerType.WHO and rules.name_nouns and \
                _asks_for_name(tokens, frozenset(stem(n) for n in rules.name_nouns)):
            return kind
    return AnswerType.OTHER


__all__ = ["AnswerRules", "AnswerType", "DEFAULT_ANSWER_RULES", "answer_type"]
