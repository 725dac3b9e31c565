"""Pure helpers of the ``extractive`` mode: split text into sentences, pick the best ones, write the answer.

Sentences, words and terms come from the package's text layer (:mod:`llama_index_convrag.text`: NLTK's Punkt in the
text's language, full-width terminals, Markdown and man-page blocks on their own; Snowball stems and NLTK stop lists;
jieba's words for Chinese). A language the rules do not support (:func:`~llama_index_convrag.text.rules_on`) has no
answer-type rules: its sentences are ranked by the question's words they share, the embedding and their passage's
rank only.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import regex as re

from llama_index_convrag.synthesizers.answer_rules import DEFAULT_ANSWER_RULES, AnswerRules, AnswerType, answer_type
from llama_index_convrag.text import HAN, identify, is_cjk, month_names, rules_on, split_sentences, terms


@dataclass(frozen=True)
class Sentence:
    """One sentence of chunk ``chunk`` (0-based), ``position`` within that chunk, in ``language`` (its chunk's)."""

    chunk: int
    position: int
    text: str
    language: str = ""


def sentences_of(chunks: Sequence[str]) -> List[Sentence]:
    """Every sentence of every chunk, in document order, each distinct sentence once (first occurrence kept); each
    carries its chunk's language (identified once per chunk)."""
    seen = set()
    out: List[Sentence] = []
    for chunk_index, chunk in enumerate(chunks):
        language = identify(chunk)
        for position, text in enumerate(split_sentences(chunk, language)):
            if text not in seen:
                seen.add(text)
                out.append(Sentence(chunk_index, position, text, language))
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
    return left + right if left[-1:] and unicodedata.east_asian_width(left[-1]) in "WF" else f"{left} {right}"


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


# --- scoring sentences as answers -------------------------------------------------------------------------------

_MONTH = "|".join(month_names("en"))
_OPEN_TYPES = (AnswerType.HOW_TO, AnswerType.DEFINITION, AnswerType.OTHER)  # a definition line may answer these
#: Evidence of an answer of each type, searched in the sentence with the question's words removed. A place: "in" /
#: "at" before a capital, a Chinese name ending in 省 / 市 / 国 ..., or 位于 / 坐落 / 地处 ("located in": 华北平原 has
#: no suffix).
_FEATURES = {
    AnswerType.WHEN: re.compile(rf"\b(?:1[0-9]|20)\d\d\b|\b(?:{_MONTH})\b|\d+\s*[年月日号]|"
                                rf"\p{{Numeric_Type=Numeric}}+月", re.I),
    AnswerType.COUNT: re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|hundred|thousand|"
                                 r"million|billion)\b|\p{Numeric_Type=Numeric}", re.I),
    AnswerType.WHO: re.compile(r"\bby\s+[A-Z]|(?<![.!?]\s)(?<!^)\b\p{Lu}\p{Ll}+|\p{Han}{2,}(?:公司|集团|队|俱乐部)"),
    AnswerType.WHERE: re.compile(r"\b(?:in|at|near|from)\s+[A-Z]|\p{Han}+(?:省|市|县|区|国|州)|位于|坐落|地处"),
    AnswerType.HOW_TO: re.compile(r"^-{1,2}[A-Za-z]|\s-{1,2}[A-Za-z][\w-]*|\b(?:use|run|type|press|set|add|option)\b",
                                  re.I),
    AnswerType.DEFINITION: re.compile(r"\b(?:is|are|means|refers to|stands for)\b|是|指|^-{1,2}[A-Za-z]", re.I),
}
#: A man-page or --help definition line: "-a, --all do not ignore entries starting with ."
DEFINITION_LINE = re.compile(r"^(?:-{1,2}[A-Za-z0-9][\w-]*(?:[= ][A-Z_\[\]=]+)?,?\s*)+\s+\S")
_PRONOUN_START = re.compile(r"^(?:it|its|this|these|that|those|they|he|she|his|her|their|such)\b|^[它他她其这该此]", re.I)


@dataclass(frozen=True)
class Question:
    """The content terms of a question, the type of answer it asks for, its language, and the rules it is answered
    under."""

    terms: frozenset
    answer_type: str
    language: str = "en"
    rules: AnswerRules = field(default=DEFAULT_ANSWER_RULES, repr=False, compare=False)


#: A Markdown heading, a man-page section heading or a man page's header line opening a sentence ("## How a turn
#: flows", "NAME ls - list ...", "SYNOPSIS ...", "SORT(1) User Commands SORT(1)"): a title, not an answer.
_HEADING = re.compile(r"^#{1,6}\s|^[A-Z]{4,}(?:\s[A-Z]{2,})*\s|^[A-Z][A-Z0-9_.-]*\(\d\w*\)")


def terms_of(text: str, language: Optional[str] = None) -> List[str]:
    """The content terms of ``text`` (:func:`llama_index_convrag.text.terms`: stemmed, stop words dropped, jieba's
    words for Chinese) in ``language`` (identified when None)."""
    return terms(text, language)


def question_of(text: str, rules: AnswerRules = DEFAULT_ANSWER_RULES) -> Question:
    """The :class:`Question` of ``text``: its content terms, its answer type (``other`` in a language the rules do
    not support) and its language."""
    language = identify(text)
    kind = answer_type(text, rules) if rules_on(language) else AnswerType.OTHER
    return Question(frozenset(terms_of(text, language)), kind, language, rules)


def _without(text: str, question: "Question") -> str:
    """``text`` less its words that are question terms in any form (``Awards`` for the term ``award``), and less the
    question's Chinese terms (not written between spaces)."""
    kept = [w for w in text.split() if HAN.search(w) or not set(terms_of(w, question.language)) & question.terms]
    rest = " ".join(kept)
    for term in question.terms:
        if HAN.search(term):
            rest = rest.replace(term, " ")
    return rest


def type_evidence(question: Question, text: str) -> bool:
    """Whether ``text`` holds evidence of the answer type (a year for ``when``, a number for ``count``, ...) beyond
    the question's own words."""
    pattern = _FEATURES.get(question.answer_type)
    if pattern is None:
        return False
    return pattern.search(_without(text, question)) is not None


#: The parts of a date: a year, a month, a day with its month.
_DATE_PARTS = (
    re.compile(r"\b(?:1[0-9]|20)\d\d\b|\d{4}\s*年"),
    re.compile(rf"\b(?:{_MONTH})\.?(?!\w)|\d{{1,2}}\s*月", re.I),
    re.compile(rf"\b(?:{_MONTH})\.?\s+\d{{1,2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTH})\b|\d{{1,2}}\s*[日号]", re.I),
)
#: A person's or an organisation's name of two or more capitalised words ("Justin Kurzel", "Chloé Zhao"), or a
#: Chinese name with a middle dot ("詹姆斯·卡梅隆").
_FULL_NAME = re.compile(r"\b\p{Lu}\p{Ll}+(?:\s+\p{Lu}\.)?\s+\p{Lu}\p{Ll}+|\p{Han}+·\p{Han}+")


def type_strength(question: Question, text: str) -> float:
    """How much answer-type evidence ``text`` holds beyond the question's words, 0 to 1: for ``when``, a third per
    part of a date it holds (a year, a month, a day with its month: ``rules.date_thirds``), so a full date outranks
    a month and a year ("in August 2021") and a year alone; for ``who``, ``rules.who_single`` for a single
    capitalised word and 1 for a full name; for the other types 1 when :func:`type_evidence` finds some."""
    if not type_evidence(question, text):
        return 0.0
    rest = _without(text, question)
    if question.answer_type == AnswerType.WHO:
        return 1.0 if _FULL_NAME.search(rest) else question.rules.who_single
    if question.answer_type != AnswerType.WHEN or not question.rules.date_thirds:
        return 1.0
    return sum(p.search(rest) is not None for p in _DATE_PARTS) / len(_DATE_PARTS)


def term_overlaps(question: Question, candidates: Sequence[Sentence]) -> List[float]:
    """Per sentence: the IDF-weighted share (0 to 1) of the question's terms it holds (a Chinese term also where it
    is written inside a longer word)."""
    sets = [frozenset(terms_of(s.text, s.language or None)) for s in candidates]
    n = len(candidates)
    weight = {t: math.log(1 + n / (1 + sum(t in s for s in sets))) for t in question.terms}
    total = sum(weight.values())
    if not total:
        return [0.0] * n
    out = []
    for s, held in zip(candidates, sets):
        got = sum(w for t, w in weight.items() if t in held or (HAN.search(t) and t in s.text))
        out.append(got / total)
    return out


def overlaps(question: Question, candidates: Sequence[Sentence]) -> List[float]:
    """Per sentence: its :func:`term_overlaps` share, or ``rules.context_share`` of the previous sentence's in its
    passage when more (0: the sentence is off the question's terms)."""
    own = term_overlaps(question, candidates)
    previous = {(s.chunk, s.position): o for s, o in zip(candidates, own)}
    share = question.rules.context_share
    return [max(mine, share * previous.get((s.chunk, s.position - 1), 0.0)) for s, mine in zip(candidates, own)]


def cheap_scores(question: Question, candidates: Sequence[Sentence],
                 overlap_of: Optional[Sequence[float]] = None) -> List[float]:
    """Per sentence: its :func:`overlaps` share (given as ``overlap_of``, else computed), answer-type evidence
    (:func:`type_strength`), a definition-line bonus for how-to and definition questions, and the rank of its
    passage, weighed by ``question.rules``."""
    rules = question.rules
    shares = overlaps(question, candidates) if overlap_of is None else overlap_of
    scores = []
    for s, overlap in zip(candidates, shares):
        score = rules.w_terms * overlap + rules.w_rank / (s.chunk + 1)
        if overlap and rules.w_type:
            score += rules.w_type * type_strength(question, s.text)
        if question.answer_type in _OPEN_TYPES and DEFINITION_LINE.match(s.text):
            score += rules.w_definition
        if len(s.text) < 12 or _HEADING.match(s.text):
            score -= rules.heading_penalty
        scores.append(score)
    return scores


def embed_text(text: str, rules: AnswerRules = DEFAULT_ANSWER_RULES) -> str:
    """The start of ``text`` that is embedded: ``rules.embed_chars`` characters, ``rules.embed_cjk_chars`` for
    CJK."""
    head = text[: rules.embed_chars]
    cjk = sum(1 for ch in head if is_cjk(ch))
    return text[: rules.embed_cjk_chars if cjk * 4 > len(head) else rules.embed_chars]


def shortlist(scores: Sequence[float], cap: int = DEFAULT_ANSWER_RULES.embed_cap,
              reserved: Sequence[int] = ()) -> List[int]:
    """Indexes of the ``cap`` best cheap scores, best first (ties in document order), of which up to half are the
    best of ``reserved`` (definition lines for a how-to question: their words rarely repeat the question's)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    keep = set(sorted(reserved, key=lambda i: (-scores[i], i))[: cap // 2])
    out = [i for i in order if i in keep]
    out += [i for i in order if i not in keep][: cap - len(out)]
    return sorted(out, key=lambda i: (-scores[i], i))


def definition_lines(question: Question, candidates: Sequence[Sentence]) -> List[int]:
    """Indexes of the definition lines among ``candidates`` when ``question`` asks how to, what is, or other."""
    if question.answer_type not in _OPEN_TYPES:
        return []
    return [i for i, s in enumerate(candidates) if DEFINITION_LINE.match(s.text)]


def reserved(question: Question, candidates: Sequence[Sentence]) -> List[int]:
    """The sentences given up to half of the shortlist whatever their cheap scores: the definition lines for a
    question asking how to, what is, or other (:func:`definition_lines`), and, with ``rules.reserve_evidence``, the
    sentences holding the whole evidence of the kind of answer a typed question asks for (a full name for ``who``)."""
    if question.answer_type in _OPEN_TYPES:
        return definition_lines(question, candidates)
    if not question.rules.reserve_evidence:
        return []
    return [i for i, s in enumerate(candidates) if type_strength(question, s.text) >= 1.0]


def keep_share(question: Question, on_topic: bool = True) -> float:
    """The share of the best score a sentence needs to be quoted: ``rules.keep_share`` for a factoid question (who,
    when, where, how many: ``rules.factoid_types``) or a sentence off the question's terms (not ``on_topic``: an
    unrelated passage), ``rules.open_share`` for a sentence on them answering any other question."""
    rules = question.rules
    return rules.keep_share if question.answer_type in rules.factoid_types or not on_topic else rules.open_share


def with_evidence(question: Question, candidates: Sequence[Sentence], indexes: Sequence[int]) -> List[int]:
    """Those of ``indexes`` whose sentence holds evidence of the answer type (:func:`type_evidence`) when the question
    asks for one of ``rules.evidence_types`` (a date, a place, an amount) and one of them does, else all of
    ``indexes``: a sentence without a date does not say when, however many of the question's words it repeats."""
    if question.answer_type not in question.rules.evidence_types:
        return list(indexes)
    held = [i for i in indexes if type_evidence(question, candidates[i].text)]
    return held if held else list(indexes)


def near_best(scores: Sequence[float], share: float = DEFAULT_ANSWER_RULES.keep_share,
              shares: Optional[Sequence[float]] = None) -> List[int]:
    """Indexes of ``scores`` at least ``share`` of the best, or each its own share of ``shares`` when given (all of
    them when the best is not positive)."""
    best = max(scores, default=0.0)
    own = [share] * len(scores) if shares is None else shares
    return [i for i, s in enumerate(scores) if best <= 0 or s >= own[i] * best]


def with_neighbour(candidates: Sequence[Sentence], chosen: Sequence[int]) -> List[int]:
    """``chosen`` (best first) plus, when the best starts with a pronoun ("It was ..."), the sentence before it in
    the same passage, so the quote says what "it" is."""
    out = list(chosen)
    if not out or not _PRONOUN_START.match(candidates[out[0]].text):
        return out
    best = candidates[out[0]]
    for i, s in enumerate(candidates):
        if s.chunk == best.chunk and s.position == best.position - 1 and i not in out:
            out.append(i)
    return out
