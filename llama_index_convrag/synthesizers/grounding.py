"""Grounding, cheaply: which answer sentences no passage supports, and citations for an answer written without them.

No LLM call by default. An answer is split into sentences (:func:`llama_index_convrag.text.split_sentences`) and
each sentence, its ``[n]`` markers removed, is compared with every passage by its content terms
(:func:`llama_index_convrag.text.terms`: Snowball stems less stop words, jieba's words for Chinese), under
:class:`GroundingRules`:

* **overlap** with a passage: the share of the sentence's distinct terms the passage holds;
* a passage **supports** the sentence when the overlap is at least ``support_share`` and every number the
  sentence states ("1889", "12") appears in the passage (a right topic with a wrong figure is not support) and the
  passage's sentence closest to it says "not" exactly when it does (``negations``: "was not completed in 1889" is
  not supported by "was completed in 1889");
* a sentence with fewer than ``min_terms`` terms ("Yes.") or one that says the passages do not answer ("The
  context does not mention it.", "没有提到") is not judged.

:func:`check_grounding` gives one :class:`SentenceSupport` per judged sentence; :func:`grounding_record` the turn
record's summary (each unsupported sentence with its ``reason``). A model can replace the term overlap
(``scorer``: :data:`SupportScorer`, e.g. an NLI model); :func:`cite_sentences` inserts ``[n]`` (the best supporting
passage, 1-based as ``citations=True`` numbers them) after each supported sentence of an answer written without
markers (the ``citation_mode="aligned"`` answers and the engine's retry). :func:`cite_judged` does both at once: it
cites and returns every sentence's judgment, so an aligned answer is judged once (a stream is cited sentence by
sentence by :class:`~llama_index_convrag.synthesizers.stream_hold.StreamHold`, which keeps the judgments for the
record).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.synthesizers import sentences as S
from llama_index_convrag.synthesizers.citations import MARKER_RE, has_answer_text, strip_markers
from llama_index_convrag.text import HAN, identify, sentence_spans, split_sentences, words

METHOD = "lexical"


@dataclass(frozen=True)
class GroundingRules:
    """The thresholds and word lists of the lexical check, each with the measurement that chose it."""

    support_share: float = 0.5
    """A passage supports a sentence holding at least this share of its distinct content terms (and its numbers):
    RGB answers of the real-LLM runs (``bench/real_answers.py``) flag 0.00-0.08 sentences per answer at 0.5."""
    min_terms: int = 2
    """Sentences with fewer content terms ("Yes.") are not judged (nothing to compare). Measured:
    ``tests/synthesizers/test_grounding.py`` ("Yes." is not judged) and ``bench/real_answers.py`` (unsupported
    sentences per answer)."""
    negations: Tuple[str, ...] = ("not", "no", "never", "n't", "cannot", "nicht", "kein", "keine", "nie", "pas", "jamais",
                                  "nunca", "не", "нет", "никогда", "不", "没", "没有", "未", "无")
    """Words that turn a claim round: a sentence and its best passage sentence that differ in them do not support
    each other ("was not completed in 1889" against "was completed in 1889": ``tests/synthesizers/test_grounding.py``
    holds the probe)."""
    refusals: Tuple[str, ...] = ("know", "mention", "mentioned", "information", "provide", "provided", "answer",
                                 "determine", "determined", "specify", "specified", "state", "stated", "不知道",
                                 "没有提到", "未提及", "没有提及", "无法回答", "无法确定", "没有相关信息", "未提供")
    """A sentence that negates one of these says the passages hold no answer ("The context does not mention it."):
    a refusal, not a claim to check (the answers of ``bench/real_answers.py``)."""

    def __post_init__(self) -> None:
        if isinstance(self.support_share, bool) or not isinstance(self.support_share, (int, float)) \
                or not 0 < self.support_share <= 1:
            raise ConfigurationError(f"support_share must be a number in (0, 1], got {self.support_share!r}")
        if isinstance(self.min_terms, bool) or not isinstance(self.min_terms, int) or self.min_terms < 1:
            raise ConfigurationError(f"min_terms must be an int >= 1, got {self.min_terms!r}")


DEFAULT_GROUNDING_RULES = GroundingRules()

SupportScorer = Callable[[str, Sequence[str]], Sequence[float]]
"""A model that scores how well each passage supports a claim, 0 to 1 (an NLI or cross-encoder model wrapped as
``scorer(claim, passages) -> scores``); a sentence is supported by the best passage scoring at least
``support_share``. The lexical check is the default."""


@dataclass(frozen=True)
class SentenceSupport:
    """One judged answer sentence: its position among the answer's sentences, its text (as written, markers
    included), the best passage (0-based, None when no passage shares a term), that passage's overlap (or the
    scorer's score), whether it supports the sentence, and why not (``""``, ``"numbers"``: a number the passage
    lacks, ``"negation"``: one of the two says "not" where the other does not, ``"overlap"``)."""

    index: int
    text: str
    source: Optional[int]
    overlap: float
    supported: bool
    reason: str = ""


def _numbers(text: str) -> List[str]:
    """The numbers ``text`` states ("1889", "12", "3.5"; thousands separators off), as the text layer cuts them."""
    plain = (w.replace(",", "") for w in words(text))
    return [n for n in plain if n[:1].isdigit() and n.replace(".", "").isdigit()]


def _terms(text: str) -> FrozenSet[str]:
    return frozenset(S.terms_of(text))


def _overlap(terms: FrozenSet[str], passage: str, passage_terms: FrozenSet[str]) -> float:
    held = sum(1 for t in terms if t in passage_terms or (HAN.search(t) and t in passage))
    return held / len(terms)


def _negated(text: str, rules: GroundingRules) -> bool:
    low = text.lower()
    tokens = set(words(low)) | ({"n't"} if "n't" in low else set())
    return any(n in tokens or (HAN.search(n) and n in text) for n in rules.negations)


def _refusal(claim: str, rules: GroundingRules) -> bool:
    if not _negated(claim, rules):
        return any(HAN.search(r) and r in claim for r in rules.refusals)
    tokens = set(words(claim.lower()))
    return any(r in tokens or (HAN.search(r) and r in claim) for r in rules.refusals)


def _polarity_agrees(claim: str, terms: FrozenSet[str], passage: str, rules: GroundingRules) -> bool:
    """Whether the passage sentence closest to ``claim`` (most of its terms) says "not" exactly when ``claim``
    does."""
    sentences = split_sentences(passage, identify(passage))
    if not sentences:
        return True
    closest = max(sentences, key=lambda x: _overlap(terms, x, frozenset(S.terms_of(x))))
    return _negated(claim, rules) == _negated(closest, rules)


def _verdict(claim: str, terms: FrozenSet[str], numbers: Sequence[str], passage: str, score: float,
             rules: GroundingRules) -> str:
    """Why ``passage`` does not support ``claim`` (``""``: it does)."""
    if score < rules.support_share:
        return "overlap"
    if not all(n in passage.replace(",", "") for n in numbers):
        return "numbers"
    if not _polarity_agrees(claim, terms, passage, rules):
        return "negation"
    return ""


def _supports(numbers: Sequence[str], passage: str, overlap: float,
              rules: GroundingRules = DEFAULT_GROUNDING_RULES) -> bool:
    plain = passage.replace(",", "")
    return overlap >= rules.support_share and all(n in plain for n in numbers)


def judge_sentence(index: int, sentence: str, passages: Sequence[str], passage_terms: Sequence[FrozenSet[str]],
                   rules: GroundingRules = DEFAULT_GROUNDING_RULES,
                   scorer: Optional[SupportScorer] = None) -> Optional[SentenceSupport]:
    """The :class:`SentenceSupport` of one sentence, None when it is not judged (too short, a refusal, markers
    only). The best passage is the first supporting one of highest overlap (or ``scorer`` score), else the one of
    highest."""
    claim = strip_markers(sentence)
    terms = _terms(claim)
    if not has_answer_text(sentence) or len(terms) < rules.min_terms or _refusal(claim, rules):
        return None
    numbers = _numbers(claim)
    scores = list(scorer(claim, list(passages))) if scorer is not None else \
        [_overlap(terms, p, held) for p, held in zip(passages, passage_terms)]
    best: Tuple[bool, float] = (False, 0.0)
    source: Optional[int] = None
    why = "overlap"
    for i, (passage, score) in enumerate(zip(passages, scores)):
        verdict = _verdict(claim, terms, numbers, passage, score, rules) if score >= rules.support_share else "overlap"
        key = (verdict == "", score)
        if score > 0 and key > best:
            best, source, why = key, i, verdict
    return SentenceSupport(index, sentence, source, round(best[1], 3), best[0], "" if best[0] else why)


def check_grounding(answer: str, passages: Sequence[str], rules: GroundingRules = DEFAULT_GROUNDING_RULES,
                    scorer: Optional[SupportScorer] = None) -> List[SentenceSupport]:
    """Every judged sentence of ``answer`` against ``passages`` (see the module docstring), in answer order."""
    if not isinstance(rules, GroundingRules):
        raise ArgumentTypeError(f"rules must be a GroundingRules, got {type(rules).__name__}")
    passage_terms = passage_terms_of(passages)
    judged = (judge_sentence(i, s, passages, passage_terms, rules, scorer)
              for i, s in enumerate(split_sentences(answer)))
    return [j for j in judged if j is not None]


def grounding_record(answer: str, passages: Sequence[str], rules: GroundingRules = DEFAULT_GROUNDING_RULES,
                     scorer: Optional[SupportScorer] = None) -> Dict[str, Any]:
    """The turn record's ``grounding``: ``method`` (``lexical``, or the scorer's name), ``support_share``,
    ``judged`` (sentences judged) and ``unsupported``: ``{"sentence", "text", "best_source", "overlap", "reason"}``
    per sentence no passage supports (``best_source``: the 1-based marker of the closest passage, or None)."""
    return grounding_of(check_grounding(answer, passages, rules, scorer), rules, scorer)


def grounding_of(judged: Sequence[SentenceSupport], rules: GroundingRules = DEFAULT_GROUNDING_RULES,
                 scorer: Optional[SupportScorer] = None) -> Dict[str, Any]:
    """:func:`grounding_record` of sentences judged already (:func:`check_grounding`, :func:`cite_judged`)."""
    method = METHOD if scorer is None else getattr(scorer, "__name__", type(scorer).__name__)
    return {
        "method": method, "support_share": rules.support_share, "judged": len(judged),
        "unsupported": [{"sentence": j.index, "text": j.text, "best_source": None if j.source is None else j.source + 1,
                         "overlap": j.overlap, "reason": j.reason} for j in judged if not j.supported],
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


def citing_source(index: int, sentence: str, passages: Sequence[str], passage_terms: Sequence[FrozenSet[str]],
                  scorer: Optional[SupportScorer] = None,
                  rules: GroundingRules = DEFAULT_GROUNDING_RULES) -> Optional[int]:
    """The passage (0-based) a sentence is cited with: the best supporting one (:func:`judge_sentence`); for a short
    answer too small to judge ("70", "Tampa Bay."), the first passage holding all of its terms and numbers; else
    None."""
    judged = judge_sentence(index, sentence, passages, passage_terms, rules, scorer)
    return source_for(judged, sentence, passages, passage_terms, rules)


def source_for(judged: Optional[SentenceSupport], sentence: str, passages: Sequence[str],
               passage_terms: Sequence[FrozenSet[str]],
               rules: GroundingRules = DEFAULT_GROUNDING_RULES) -> Optional[int]:
    """:func:`citing_source` of a sentence whose judgment (:func:`judge_sentence`) is ``judged``."""
    if judged is not None:
        return judged.source if judged.supported else None
    claim = strip_markers(sentence)
    terms = _terms(claim)
    if not terms or _refusal(claim, rules):
        return None
    numbers = _numbers(claim)
    return next((i for i, (p, held) in enumerate(zip(passages, passage_terms))
                 if _overlap(terms, p, held) == 1.0 and _supports(numbers, p, 1.0, rules)), None)


def insert_markers(text: str, passages: Sequence[str], passage_terms: Sequence[FrozenSet[str]],
                   scorer: Optional[SupportScorer] = None) -> str:
    """``text`` as written (its line breaks and spacing kept), `` [n]`` inserted before the end punctuation of each
    sentence a passage supports (``n``: :func:`citing_source`, 1-based); a sentence that holds a marker already
    (the model wrote one anyway) is left as it is."""
    return cite_judged(text, passages, passage_terms, scorer=scorer)[0]


def cite_judged(text: str, passages: Sequence[str], passage_terms: Sequence[FrozenSet[str]], first: int = 0,
                scorer: Optional[SupportScorer] = None, rules: GroundingRules = DEFAULT_GROUNDING_RULES,
                ) -> Tuple[str, List[SentenceSupport], int]:
    """``text`` cited as :func:`insert_markers` cites it, with the judgment of each of its sentences that is judged
    (:func:`judge_sentence`; sentence indices counted from ``first``) and the number of sentences read: the grounding
    record of an aligned answer comes from these (:func:`grounding_of`), not from a second pass."""
    out: List[str] = []
    judged: List[SentenceSupport] = []
    pos = 0
    spans = sentence_spans(text)
    for i, (start, end, sentence) in enumerate(spans, start=first):
        verdict = judge_sentence(i, sentence, passages, passage_terms, rules, scorer)
        if verdict is not None:
            judged.append(verdict)
        source = None if MARKER_RE.search(sentence) else source_for(verdict, sentence, passages, passage_terms, rules)
        if source is not None:
            out.append(text[pos:start] + _cite(text[start:end], source + 1))
            pos = end
    out.append(text[pos:])
    return "".join(out), judged, len(spans)


def cite_sentences(answer: str, passages: Sequence[str], scorer: Optional[SupportScorer] = None) -> str:
    """``answer`` (written without markers) with each sentence that a passage supports followed by `` [n]``
    (:func:`citing_source`, ``scorer`` judging support when given; 1-based, as ``citations=True`` numbers them); the
    other sentences stay uncited. Nothing else of the answer changes (:func:`insert_markers`)."""
    return insert_markers(answer, passages, passage_terms_of(passages), scorer)


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
    while end > 0 and (body[end - 1] in ".!?。！？" or unicodedata.category(body[end - 1]) in ("Pf", "Pe")
                       or body[end - 1] in "\"'"):
        end -= 1
    space = "" if end and unicodedata.east_asian_width(body[end - 1]) in "WF" else " "
    return f"{body[:end]}{space}[{marker}]{body[end:]}"


__all__ = ["DEFAULT_GROUNDING_RULES", "GroundingRules", "METHOD", "PASSAGE_TERMS_CACHE", "SentenceSupport",
           "SupportScorer", "check_grounding", "cite_judged", "cite_sentences", "citing_source", "grounding_of",
           "grounding_record", "insert_markers", "judge_sentence", "passage_terms_of", "source_for"]
