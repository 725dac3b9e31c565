"""Pure helpers of the ``extractive`` mode: split text into sentences, pick the best ones, write the answer.

Sentences, words and terms come from the package's text layer (:mod:`llama_index_convrag.text`: NLTK's Punkt in the
text's language, full-width terminals, Markdown and man-page blocks on their own; Snowball stems and NLTK stop lists;
jieba's words for Chinese). A language the rules do not support (:func:`~llama_index_convrag.text.rules_on`) has no
answer-type rules: its sentences are ranked by the question's words they share, the embedding and their passage's
rank only.
"""

from __future__ import annotations

import math
import regex as re
import unicodedata
from dataclasses import dataclass
from typing import List, Optional, Sequence

from llama_index_convrag.text import HAN, identify, is_cjk, rules_on, split_sentences, terms


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

#: Nouns whose answer is a name ("Which actor won ...", "What movie won ..."): a person, a group or a titled work;
#: "which/what [one word] NOUN" asks ``who`` (its evidence is a capitalised name).
_NAMED = ("actor", "actress", "director", "player", "singer", "author", "writer", "person", "team", "company", "band",
          "artist", "president", "leader", "winner", "movie", "film", "song", "album", "book", "novel", "show", "game")
#: The answer types :func:`answer_type` tells apart.
WHO, WHEN, WHERE, COUNT, HOW_TO, DEFINITION, OTHER = "who", "when", "where", "count", "how-to", "definition", "other"
_TYPE_RULES = (  # (answer type, pattern of the question), first match wins ("How do I X when Y" asks how to)
    (COUNT, re.compile(r"\bhow (?:many|much|long|far|old|big|tall|high)\b|\bnumber of\b|多少|几", re.I)),
    (HOW_TO, re.compile(r"\bhow (?:do|can|to|should|would)\b|\bwhich (?:option|flag|command)\b|如何|怎么|怎样", re.I)),
    # "when" asks for a time as the question's word ("When was ...", "and when did ...", "... when is the premiere"),
    # not as a conjunction after another question word ("What happens to X when it fails?")
    (WHEN, re.compile(r"\bwhen (?:did|was|were|is|are|does|do|will|would|has|have|had|could|can)\b|"
                      r"\b(?:know|tell me|remember|find out|wonder)\s+when\b|"
                      r"^\W*(?:(?:and|so|but|then|ok|okay)\W+)?when\b(?!.*\b(?:what|who|whom|where|how|which|why)\b)|"
                      r"\bwhat (?:year|date|day|month|time)\b|\bwhich (?:year|date|day)\b|\bdates?\b|何时|什么时候|哪一?[年天月]|日期|时间", re.I)),
    (WHO, re.compile(r"\bwho(?:m|se)?\b|谁|哪位|\b(?:which|what)\s+(?:[a-z]+\s+)?(?:" + "|".join(_NAMED) + r")s?\b",
                     re.I)),
    (WHERE, re.compile(r"\bwhere\b|\blocation\b|\bwhich (?:city|country|place|state)\b|哪里|在哪|哪个(?:城市|国家|地方)|地点", re.I)),
    (DEFINITION, re.compile(r"\bwhat (?:is|are|does)\b|\bmeaning of\b|\bdefine\b|是什么|什么是", re.I)),
)
#: Month names: evidence of a date in a sentence (``_FEATURES``, ``_DATE_PARTS``).
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
#: Evidence of an answer of each type, searched in the sentence with the question's words removed. A place: "in" /
#: "at" before a capital, a Chinese name ending in 省 / 市 / 国 ..., or 位于 / 坐落 / 地处 ("located in": 华北平原 has
#: no suffix).
_FEATURES = {
    WHEN: re.compile(rf"\b(?:1[0-9]|20)\d\d\b|\b(?:{_MONTHS})\b|\d+\s*[年月日号]|[一二三四五六七八九十]+月", re.I),
    COUNT: re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|hundred|thousand|million|billion)\b|[一二三四五六七八九十百千万亿]", re.I),
    WHO: re.compile(r"\bby\s+[A-Z]|(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+|\p{Han}{2,}(?:公司|集团|队|俱乐部)"),
    WHERE: re.compile(r"\b(?:in|at|near|from)\s+[A-Z]|\p{Han}+(?:省|市|县|区|国|州)|位于|坐落|地处"),
    HOW_TO: re.compile(r"^-{1,2}[A-Za-z]|\s-{1,2}[A-Za-z][\w-]*|\b(?:use|run|type|press|set|add|option)\b", re.I),
    DEFINITION: re.compile(r"\b(?:is|are|means|refers to|stands for)\b|是|指|^-{1,2}[A-Za-z]", re.I),
}
#: A man-page or --help definition line: "-a, --all do not ignore entries starting with ."
DEFINITION_LINE = re.compile(r"^(?:-{1,2}[A-Za-z0-9][\w-]*(?:[= ][A-Z_\[\]=]+)?,?\s*)+\s+\S")
_PRONOUN_START = re.compile(r"^(?:it|its|this|these|that|those|they|he|she|his|her|their|such)\b|^[它他她其这该此]", re.I)
#: Weights of the final score: question-term overlap, embedding similarity, answer-type evidence, definition line,
#: passage rank (1 for the first passage, falling as 1 / (rank + 1)).
W_TERMS, W_EMBED, W_TYPE, W_DEFINITION, W_RANK = 1.0, 0.8, 0.4, 0.15, 0.2
#: Sentences embedded per answer: the best by the cheap scores (terms, type, rank) only.
EMBED_CAP = 4
#: Characters of a sentence embedded, Latin and CJK text (a long run-together line is judged by its start; a CJK
#: character is about one word piece, a Latin one about a quarter).
EMBED_CHARS, EMBED_CJK_CHARS = 200, 64


@dataclass(frozen=True)
class Question:
    """The content terms of a question, the type of answer it asks for and its language."""

    terms: frozenset
    answer_type: str
    language: str = "en"


#: A Markdown heading, a man-page section heading or a man page's header line opening a sentence ("## How a turn
#: flows", "NAME ls - list ...", "SYNOPSIS ...", "SORT(1) User Commands SORT(1)"): a title, not an answer.
_HEADING = re.compile(r"^#{1,6}\s|^[A-Z]{4,}(?:\s[A-Z]{2,})*\s|^[A-Z][A-Z0-9_.-]*\(\d\w*\)")
#: What a heading or a fragment (under 12 characters) loses: it names the topic, it does not answer.
HEADING_PENALTY = 1.0


def terms_of(text: str, language: Optional[str] = None) -> List[str]:
    """The content terms of ``text`` (:func:`llama_index_convrag.text.terms`: stemmed, stop words dropped, jieba's
    words for Chinese) in ``language`` (identified when None)."""
    return terms(text, language)


def answer_type(question: str) -> str:
    """``who``, ``when``, ``where``, ``count``, ``how-to``, ``definition`` or ``other`` (English and Chinese cues)."""
    for kind, pattern in _TYPE_RULES:
        if pattern.search(question):
            return kind
    return OTHER


def question_of(text: str) -> Question:
    """The :class:`Question` of ``text``: its content terms, its answer type (``other`` in a language the rules do
    not support) and its language."""
    language = identify(text)
    kind = answer_type(text) if rules_on(language) else OTHER
    return Question(frozenset(terms_of(text, language)), kind, language)


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


#: Their short forms ("Oct", "Aug."), a month of :data:`_DATE_PARTS` as the full names are.
_SHORT_MONTHS = "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
#: The parts of a date: a year, a month, a day with its month.
_DATE_PARTS = (
    re.compile(r"\b(?:1[0-9]|20)\d\d\b|\d{4}\s*年"),
    re.compile(rf"\b(?:{_MONTHS}|(?:{_SHORT_MONTHS})\.?)\b|\d{{1,2}}\s*月", re.I),
    re.compile(rf"\b(?:{_MONTHS}|{_SHORT_MONTHS})\.?\s+\d{{1,2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS}|{_SHORT_MONTHS})\b"
               r"|\d{1,2}\s*[日号]", re.I),
)


#: A capitalised word, Latin letters with accents included ("Chloé", "Müller", "José").
_CAPITALISED = "[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ]+"
#: A person's or an organisation's name of two or more capitalised words ("Justin Kurzel", "Peter Handke"), or a
#: Chinese name with a middle dot ("詹姆斯·卡梅隆").
_FULL_NAME = re.compile(rf"\b{_CAPITALISED}(?:\s+[A-Z]\.)?\s+{_CAPITALISED}|\p{{Han}}+·\p{{Han}}+")
#: The ``who`` evidence of a single capitalised word (not a full name).
WHO_SINGLE = 0.5


def type_strength(question: Question, text: str) -> float:
    """How much answer-type evidence ``text`` holds beyond the question's words, 0 to 1: for ``when``, a third per
    part of a date it holds (:data:`_DATE_PARTS`: a year, a month, a day with its month), so a full date outranks a
    month and a year ("in August 2021") and a year alone; for ``who``, :data:`WHO_SINGLE` for a single capitalised
    word and 1 for a full name; for the other types 1 when :func:`type_evidence` finds some."""
    if not type_evidence(question, text):
        return 0.0
    rest = _without(text, question)
    if question.answer_type == WHO:
        return 1.0 if _FULL_NAME.search(rest) else WHO_SINGLE
    if question.answer_type != WHEN:
        return 1.0
    return sum(p.search(rest) is not None for p in _DATE_PARTS) / len(_DATE_PARTS)


#: A sentence after one that holds the question's terms borrows this share of that sentence's term overlap: an
#: answer often follows the sentence that names its subject ("Super Bowl LV ... Winner." "Tampa Bay Buccaneers.").
CONTEXT_SHARE = 0.5


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
    """Per sentence: its :func:`term_overlaps` share, or :data:`CONTEXT_SHARE` of the previous sentence's in its
    passage when more (0: the sentence is off the question's terms)."""
    own = term_overlaps(question, candidates)
    previous = {(s.chunk, s.position): o for s, o in zip(candidates, own)}
    return [max(mine, CONTEXT_SHARE * previous.get((s.chunk, s.position - 1), 0.0)) for s, mine in zip(candidates, own)]


def cheap_scores(question: Question, candidates: Sequence[Sentence],
                 overlap_of: Optional[Sequence[float]] = None) -> List[float]:
    """Per sentence: its :func:`overlaps` share (given as ``overlap_of``, else computed), answer-type evidence
    (:func:`type_strength`), a definition-line bonus for how-to and definition questions, and the rank of its
    passage."""
    shares = overlaps(question, candidates) if overlap_of is None else overlap_of
    scores = []
    for s, overlap in zip(candidates, shares):
        score = W_TERMS * overlap + W_RANK / (s.chunk + 1)
        if overlap:
            score += W_TYPE * type_strength(question, s.text)
        if question.answer_type in (HOW_TO, DEFINITION, OTHER) and DEFINITION_LINE.match(s.text):
            score += W_DEFINITION
        if len(s.text) < 12 or _HEADING.match(s.text):
            score -= HEADING_PENALTY
        scores.append(score)
    return scores


def embed_text(text: str) -> str:
    """The start of ``text`` that is embedded: :data:`EMBED_CHARS` characters, :data:`EMBED_CJK_CHARS` for CJK."""
    cjk = sum(1 for ch in text[:EMBED_CHARS] if is_cjk(ch))
    return text[: EMBED_CJK_CHARS if cjk * 4 > len(text[:EMBED_CHARS]) else EMBED_CHARS]


def shortlist(scores: Sequence[float], cap: int = EMBED_CAP, reserved: Sequence[int] = ()) -> List[int]:
    """Indexes of the ``cap`` best cheap scores, best first (ties in document order), of which up to half are the
    best of ``reserved`` (definition lines for a how-to question: their words rarely repeat the question's)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    keep = set(sorted(reserved, key=lambda i: (-scores[i], i))[: cap // 2])
    out = [i for i in order if i in keep]
    out += [i for i in order if i not in keep][: cap - len(out)]
    return sorted(out, key=lambda i: (-scores[i], i))


def definition_lines(question: Question, candidates: Sequence[Sentence]) -> List[int]:
    """Indexes of the definition lines among ``candidates`` when ``question`` asks how to, what is, or other."""
    if question.answer_type not in (HOW_TO, DEFINITION, OTHER):
        return []
    return [i for i, s in enumerate(candidates) if DEFINITION_LINE.match(s.text)]


#: A sentence is quoted only when its score is at least this share of the best sentence's: an answer does not pad
#: itself with sentences of unrelated passages.
KEEP_SHARE = 0.6


#: The share for a question that asks for an account rather than a fact (how, why, what is ...): its answer is often
#: told over several sentences.
OPEN_SHARE = 0.3
#: The types that ask for one fact (a name, a date, a place, an amount): quoted at :data:`KEEP_SHARE`.
FACTOID_TYPES = frozenset({WHO, WHEN, WHERE, COUNT})


def keep_share(question: Question, on_topic: bool = True) -> float:
    """The share of the best score a sentence needs to be quoted: :data:`KEEP_SHARE` for a factoid question (who,
    when, where, how many) or a sentence off the question's terms (not ``on_topic``: an unrelated passage),
    :data:`OPEN_SHARE` for a sentence on them answering any other question."""
    return KEEP_SHARE if question.answer_type in FACTOID_TYPES or not on_topic else OPEN_SHARE


#: The factoid types whose evidence is specific in both languages (a date, a number, a place after "in" or before
#: 省/市): ``who``'s evidence, a capitalised word, is everywhere in English and rare in Chinese names.
EVIDENCE_TYPES = frozenset({WHEN, WHERE, COUNT})


def with_evidence(question: Question, candidates: Sequence[Sentence], indexes: Sequence[int]) -> List[int]:
    """Those of ``indexes`` whose sentence holds evidence of the answer type (:func:`type_evidence`) when the question
    asks for a date, a place or an amount (:data:`EVIDENCE_TYPES`) and one of them does, else all of ``indexes``: a sentence without a
    date does not say when, however many of the question's words it repeats."""
    if question.answer_type not in EVIDENCE_TYPES:
        return list(indexes)
    held = [i for i in indexes if type_evidence(question, candidates[i].text)]
    return held if held else list(indexes)


def near_best(scores: Sequence[float], share: float = KEEP_SHARE,
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
