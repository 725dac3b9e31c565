"""LLM-free contextualisation of a follow-up: historical query expansion weighted by salience x recency.

:func:`contextualize` reads the earlier turns (user questions, and the answers shown after them) and returns the
follow-up with a few history terms appended, plus an explanation of every decision (pure and deterministic). Every
number below is a field of :class:`ContextRules`, passed as one typed argument:

* **Candidate terms** are content words of earlier turns (English: words outside a stop list; Chinese: runs of
  CJK characters between function words and references such as 它 / 那个). A term the follow-up already holds
  is never added.
* **Salience**: proper nouns, acronyms and numbers weigh more than common words; words from answers weigh
  ``answer_weight`` of words from questions; a name (proper noun or acronym) an answer repeats weighs that many times
  as much, at most ``answer_repeat_cap`` (the entity an answer keeps naming is what "it" or "the first one" in the
  next question most likely points to); a term seen in several turns adds up (a recurring term is the topic).
* **Recency**: a term from ``d`` user turns back weighs ``decay ** (d - 1)``; the first turn (the conversation's
  opening subject) keeps at least ``anchor_weight``.
* **Referents** (:mod:`~llama_index_convrag.conversational.referents`): "the second one", "the latter", "both",
  后者 / 第二个 put that item of the last answer's list into the query (``list_item_weight``); a pronoun that fits what
  the last question asked for ("Who discovered it?" ... "Where was he born?") means the name the last answer
  introduced (``answer_subject_weight``; ``referent_shift`` would also treat it as a topic switch). The referent is
  in the explanation.
* **Topic shifts**: a question that needs no context (see :func:`~llama_index_convrag.conversational.triggers.needs_rewrite`)
  and names content the history never mentioned starts a new topic. When the follow-up itself is such a
  question (every content term new to the conversation (``shift_answers``: its questions and every answer, or its
  questions and the last answer only), or ``shift_new_share`` of them with none of the last turn's and no "the ..."
  pointing back), and names a subject of its own (a proper noun, an acronym, a Chinese
  phrase, or at least ``shift_min_terms`` content words: "How do volcanoes form underwater?"), nothing is added; a
  short one in
  common words ("How's the sector managed?") may well mean the conversation's subject and is expanded, with history
  as a light prior. When an earlier turn was a shift, terms from before it are damped by ``shift_damping``.
* **Fusion weights**: retrieval runs the follow-up alone and the contextualised query and fuses both lists
  (:mod:`llama_index_convrag.conversational.retriever`). The weight of the contextualised list comes from the
  follow-up's own evidence (:func:`_context_weight`): ``context_scale`` divided by the number of content terms the
  follow-up holds (a two-word question leans on the history, a detailed one on its own words), and at most
  ``named_subject_weight`` when it names its own subject (a proper noun, an acronym, an ellipsis' new subject).
  Then the question's own results speak (:meth:`Contextualized.weight_given`): the share of its top
  ``coverage_depth`` results that mention an added term (``coverage``) scales the weight from
  ``uncovered_factor`` (none on the conversation's topic: the question alone drifted) down to
  ``covered_factor`` (all on topic: the history has little to add). Last, the two lists speak
  (:meth:`Contextualized.agreement_factor`): when the question's own first results are mostly the expanded query's
  too, the expansion would only reshuffle them and its weight falls towards 0; when they share no more than chance,
  the history changed what the question finds and its weight rises (``agreement_slope``, ``agreement_pivot``).
  ``bench/conversational_retrieval.py`` measures these rules and their alternatives.
"""

from __future__ import annotations

import regex as re
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from llama_index_convrag.conversational.referents import (DEFAULT_REFERENT_RULES, Referent, ReferentRules,
                                                         item_reference, list_items, pick, refers_to_answer)
from llama_index_convrag.conversational.triggers import needs_rewrite
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.text import HAN, identify, rules_on, sentence_spans, split_sentences, stop_words, words

#: A word of a language written with spaces (any script but CJK), with its inner apostrophes and hyphens.
_EN_WORD = re.compile(r"(?:(?![\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}])[\p{L}\p{N}])"
                      r"(?:(?![\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}])[\p{L}\p{N}\p{M}'’\-])*")
# "how long", "how many": the word after "how" asks for a quantity, it names no topic.
_HOW_MODIFIER = re.compile(r"\bhow\s+(?:long|much|many|far|often|big|large|small|tall|high|deep|wide|soon|late|"
                           r"early|fast|quickly|easy|hard|well|bad|good)\s*$", re.IGNORECASE)


#: ``ContextRules.shift_answers`` values: the last answer, or every answer.
SHIFT_ANSWERS = ("last", "all")


@dataclass(frozen=True)
class ContextRules:
    """Every tunable of the contextual rewrite and its fusion weight, as one typed value (the defaults are the
    measured settings; ``bench/conversational_retrieval.py`` passes others to compare). Checked once, here."""

    max_terms: int = 6
    """History terms added at most. Measured: ``bench/conversational_retrieval.py --term-rules`` (CAsT and CANARD, per
    half)."""
    decay: float = 0.5
    """Recency: a turn ``k`` turns back weighs ``decay ** (k - 1)``. Measured: ``bench/conversational_retrieval.py``
    (the ``ctx-expand`` and ``ctx-fuse`` rows, CAsT 2021 / 2022 and CANARD; ``--split dev|test`` for the halves)."""
    anchor_weight: float = 0.5
    """The conversation's opening turn weighs at least this (it usually names the topic). Measured:
    ``bench/conversational_retrieval.py`` ``--split dev|test`` (CAsT opens with its topic)."""
    answer_weight: float = 0.15
    """An answer's term weighs this much of a question's. Measured: ``bench/conversational_retrieval.py
    --shown-answers`` (no, gold or extractive answers, per set)."""
    answer_repeat_cap: int = 3
    """A name an answer repeats counts as often as it is named, at most this (1: once). Measured:
    ``bench/conversational_retrieval.py --term-rules`` (cap 2 / 3 / 5, per set)."""
    shift_damping: float = 0.2
    """Factor on the terms of turns before the latest earlier topic shift. Measured: ``bench/conversational_retrieval.py
    --term-rules`` (the shift test on earlier turns)."""
    min_weight: float = 0.25
    """A term is added when its summed weight reaches this. Measured: ``bench/conversational_retrieval.py``
    (the ``ctx-fuse`` rows, per set and ``--split``)."""
    context_scale: float = 2.0
    """The expanded list's weight is ``context_scale / own content terms`` ... Measured:
    ``bench/conversational_retrieval.py --weights-grid`` (scale 2 / 3, per set)."""
    max_context_weight: float = 3.0
    """... at most this. Measured: ``bench/conversational_retrieval.py --weights-grid`` (cap 3 / 4 / 5)."""
    named_subject_weight: float = 0.3
    """The weight's ceiling for a follow-up that names its own subject (history as a light prior). Measured:
    ``bench/conversational_retrieval.py --weights-grid`` (0.3 / 0.5 / 0.6; CAsT 2022 78/77 -> 79/79% per half when it
    was added)."""
    shift_min_terms: int = 3
    """A self-contained follow-up of new words (``shift_new_share``) is a topic shift when it names something or holds
    at least this many distinct content words. Measured: ``bench/conversational_retrieval.py --term-rules`` (shift at
    3 / 4 / 5 words or by names only)."""
    shift_new_share: float = 0.6
    """A self-contained follow-up counts as new words when every content term of it is new to the conversation, or when
    it holds no term of the last turn and its question (its last sentence) holds at least ``shift_min_terms`` terms,
    at least this share of them new, and no definite reference ("the album") (1.0: only the first). A change of
    subject often keeps a common word of the old one: "files" of "How do I extract files from an archive with tar?"
    in "How do I find files by name?". Measured: ``bench/conversational_retrieval.py`` (1.0 against 0.6 moves no
    figure by a point, CAsT 2021 / 2022 and CANARD per half; ``tests/cli_commands/test_topic_change.py``)."""
    shift_answers: str = "all"
    """Which answers a follow-up's terms are counted new against in that check, beside every earlier question: ``"all"``
    (every answer) or ``"last"`` (the last one only: an older answer's wording, such as the "name" and "file" of an
    option it quoted, would not make a follow-up's words old). Measured: ``bench/conversational_retrieval.py
    --shift-answers``: "last" loses on a half of both CAsT sets (gap closed, first / second half: CAsT 2021 / 256 111% /
    90% -> 105% / 91%, CAsT 2021 / 700 105% / 77% -> 102% / 77%, CAsT 2022 / 256 64% / 112% -> 63% / 108%) and moves
    CANARD by no point: follow-ups such as "Tell me more about the Pepsi commercial." name what an older answer said."""
    coverage_depth: int = 10
    """The question's own top results whose mention of the added terms sets ``coverage``. Measured:
    ``bench/conversational_retrieval.py --weights-grid`` (the coverage factors read the top 10)."""
    covered_factor: float = 0.25
    """Context-weight factor when every one of those results mentions an added term. Measured:
    ``bench/conversational_retrieval.py --weights-grid`` (0.25 / 0.35 / 0.5)."""
    uncovered_factor: float = 2.0
    """Context-weight factor when none does. Measured: ``bench/conversational_retrieval.py --weights-grid`` (2.0 / 2.5 /
    3.0)."""
    agreement_pivot: float = 0.4
    """The two lists' agreement beyond chance at which the context weight stays as it is. Measured:
    ``bench/conversational_retrieval.py --agreement-grid`` (pivot 0.35 / 0.4 / 0.45 / 0.5 at every chunk size)."""
    agreement_slope: float = 4.0
    """How fast the agreement factor falls with the agreement: ``1 + slope x (pivot - agreement)``, at least 0.
    Measured: ``bench/conversational_retrieval.py --agreement-grid`` (slope 0 (off) / 3 / 4 / 5)."""
    answer_subject_weight: float = 1.0
    """For a follow-up that refers with a pronoun (he / it / 它) after a question that asked for a name (who / which, 谁 /
    哪): the name the last answer introduced weighs this x its salience, as a term of the last question would (0: off;
    see :mod:`~llama_index_convrag.conversational.referents`). Measured: ``bench/conversational_retrieval.py
    --followups`` (on, CAsT 2021 / 256 closes 101% of the gap (111% / 89% per half) against 99% (110% / 84%) with
    both follow-up rules off)."""
    referent_shift: bool = False
    """When the pronoun resolves to such a name, the topic switched: every earlier turn's terms are damped by
    ``shift_damping`` (off: measured, it loses on CANARD in both halves of the dialogues). Measured:
    ``bench/conversational_retrieval.py --followups`` (on, CANARD / 256 closes 76% (80% / 71%) against 77% (82% /
    72%) off)."""
    referents: ReferentRules = DEFAULT_REFERENT_RULES
    """The words the list-item and answer-subject rules read (:class:`~.referents.ReferentRules`). Measured:
    ``bench/conversational_retrieval.py --followups`` (and ``tests/conversational/test_followups.py``)."""
    conversation_words: Tuple[Tuple[str, FrozenSet[str]], ...] = (
        ("en", frozenset("""
actually also another anyone anything around back came can't cannot come cool could describe describes detail details
difference differences different done else even ever everything example examples explain first get gets give go going
good got great happen happened happens here's how's however important info information interested interesting kind
kinds know known last learn let's like likely lot lots made main make makes many maybe mean means meant might much
must need new next nice often ok okay old one ones others ought please quite rather really say says see seem shall
show someone something sort sound sounds specific specifically still sure take talk tell thank thanks that's there's
thing things think though thought took type types upon us use used using want wanted way ways well went what's
whatever when's where's whether who's whose why's within without would wow yes yet""".split())),
        ("zh", frozenset("喜欢 觉得 告诉 可以 可能 想 请 介绍 一下".split())),
    )
    """Per language, words of talk rather than of a topic ("tell me", "interesting", "thanks", "the first one"),
    never history terms, beyond the language's stop list (NLTK's): ``bench/conversational_retrieval.py
    --conversation-words`` measures them off and on (CAsT, CANARD, each half; the Chinese term check)."""
    list_item_weight: float = 2.0
    """For "the second one", "the last", "both", 前者 / 后者 / 第二个: the words of that item of the last answer's list (else
    the last question's: "A or B?") weigh this x their salience (0: off). Measured:
    ``bench/conversational_retrieval.py --followups`` (the written list dialogues get their item 4 of 4 on, 1 of 4
    off; the sets rarely hold the pattern (4 follow-ups of CAsT 2021))."""
    def __post_init__(self) -> None:
        for name, low in (("max_terms", 1), ("answer_repeat_cap", 1), ("shift_min_terms", 0), ("coverage_depth", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"{name} must be an int >= {low}, got {value!r}")
        for name in ("decay", "anchor_weight", "answer_weight", "shift_damping", "min_weight", "context_scale",
                     "max_context_weight", "named_subject_weight", "covered_factor", "uncovered_factor",
                     "agreement_pivot", "agreement_slope", "answer_subject_weight", "list_item_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:  # NaN too
                raise ConfigurationError(f"{name} must be a number >= 0, got {value!r}")
        if not isinstance(self.referents, ReferentRules):
            raise ConfigurationError(f"referents must be a ReferentRules, got {type(self.referents).__name__}")
        if isinstance(self.conversation_words, dict) or not all(
                isinstance(lang, str) and isinstance(ws, frozenset) for lang, ws in self.conversation_words):
            raise ConfigurationError("conversation_words must be (language, frozenset of words) pairs, got "
                                     f"{self.conversation_words!r}")
        share = self.shift_new_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise ConfigurationError(f"shift_new_share must be a number in (0, 1], got {share!r}")
        if self.shift_answers not in SHIFT_ANSWERS:
            raise ConfigurationError(f"shift_answers must be one of {list(SHIFT_ANSWERS)}, got {self.shift_answers!r}")


DEFAULT_RULES = ContextRules()
"""The rules :func:`contextualize` applies when given none."""


def agreement_factor(agreement: float, rules: ContextRules = DEFAULT_RULES) -> float:
    """The context-weight factor for the two lists' ``agreement`` beyond chance (0 = no more shared first results
    than chance, 1 = the same first results): ``max(0, 1 + agreement_slope * (agreement_pivot - agreement))``; with the
    default rules 2.6 at 0, 1 at 0.4 and 0 from 0.65 on (lists that agree would only be reshuffled by fusion)."""
    if not 0.0 <= agreement <= 1.0:
        raise ConfigurationError(f"agreement must be between 0 and 1, got {agreement!r}")
    return max(0.0, 1.0 + rules.agreement_slope * (rules.agreement_pivot - agreement))


@dataclass(frozen=True)
class AddedTerm:
    """One history term appended to the query, with its weight and why it was chosen."""

    term: str
    weight: float
    turns_back: int
    reason: str


@dataclass(frozen=True)
class Contextualized:
    """The contextualised query and the decisions behind it (see the module docstring)."""

    question: str
    query: str
    added: Tuple[AddedTerm, ...]
    needs_context: bool
    topic_shift: bool
    reason: str
    question_weight: float = 1.0
    context_weight: float = 0.0
    rules: ContextRules = field(default=DEFAULT_RULES, repr=False, compare=False)
    referent: Optional[Referent] = None

    @property
    def coverage_depth(self) -> int:
        """How many of the question's own results :meth:`weight_given` reads (``rules.coverage_depth``)."""
        return self.rules.coverage_depth

    def weight_given(self, own_results: Sequence[str]) -> Tuple[float, float]:
        """``(coverage, context weight)`` once the question's own results are known (pure): ``coverage`` is the
        share of the first :attr:`coverage_depth` texts that mention an added term; the weight moves linearly from
        ``context_weight * rules.uncovered_factor`` (coverage 0) to ``context_weight * rules.covered_factor``
        (coverage 1)."""
        texts = list(own_results[: self.coverage_depth])
        if not texts or not self.added:
            return 0.0, self.context_weight
        terms = [a.term for a in self.added]
        coverage = sum(1 for t in texts if mentions(t, terms)) / len(texts)
        low, high = self.rules.covered_factor, self.rules.uncovered_factor
        return coverage, self.context_weight * (low + (high - low) * (1 - coverage))

    def agreement_factor(self, agreement: float) -> float:
        """The factor :meth:`weight_given`'s weight is multiplied by once both lists are known (:func:`agreement_factor`
        of their first :attr:`coverage_depth` results' agreement beyond chance)."""
        return agreement_factor(agreement, self.rules)

    def mentioned_in(self, text: str) -> bool:
        """Whether ``text`` mentions one of the added terms (:func:`mentions`)."""
        return bool(self.added) and mentions(text, [a.term for a in self.added])

    def explain(self) -> Dict[str, object]:
        """A JSON-ready record for the turn log."""
        return {
            "needs_context": self.needs_context, "topic_shift": self.topic_shift, "reason": self.reason,
            "weights": {"question": self.question_weight, "context": self.context_weight},
            "added_terms": [{"term": a.term, "weight": round(a.weight, 3), "turns_back": a.turns_back,
                             "reason": a.reason} for a in self.added],
            **({"referent": {"kind": self.referent.kind, "text": self.referent.text}} if self.referent else {}),
        }


@dataclass(frozen=True)
class HistoryTurn:
    """One earlier user turn: the question and the answer(s) shown after it (``""`` when none)."""

    question: str
    answer: str = ""


@dataclass(frozen=True)
class _Term:
    key: str
    surface: str
    salience: float
    label: str
    order: int = field(default=0)


def fold(word: str) -> str:
    """``word`` lower-cased, without a possessive ``'s`` or edge quotes and hyphens, a plural made singular (``-ies``
    -> ``-y`` past four letters; ``-s`` past three, not ``-ss``, ``-us``, ``-is``): the key a term is compared by,
    and what :func:`mentions` searches for in any of those forms."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.strip("'-")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def _stops(language: str, rules: "ContextRules") -> frozenset:
    """The words of ``language`` that are never terms: its stop list (NLTK's,
    :func:`~llama_index_convrag.text.stop_words`) and its ``rules.conversation_words``."""
    return stop_words(language) | dict(rules.conversation_words).get(language, frozenset())


def _en_terms(text: str, rules: "ContextRules") -> List[_Term]:
    out = []
    language = identify(text)
    stops = _stops(language if rules_on(language) and language != "zh" else "en", rules)
    starts = {start for start, _, _ in sentence_spans(text)}
    for m in _EN_WORD.finditer(text):
        word = m.group(0).strip("'’-")
        low = word.lower().replace("’", "'")
        if len(word) < 2 or low in stops or fold(word) in stops:
            continue
        if _HOW_MODIFIER.search(text[max(0, m.start() - 12):m.end()]):
            continue
        if word.isdigit():
            salience, label = 1.0, "number"
        elif word.isupper() and len(word) >= 2:
            salience, label = 1.5, "acronym"
        elif word[0].isupper() and m.start() not in starts:
            salience, label = 1.5, "proper noun"
        else:
            salience, label = 1.0, "content word"
        out.append(_Term(fold(word), word, salience, label, m.start()))
    return out


def _zh_terms(text: str, rules: "ContextRules") -> List[_Term]:
    """Chinese words: jieba's words of each run of Han characters (the words that tile it), less NLTK's Chinese
    stop words, the Chinese ``conversation_words`` and one-character words; longer words weigh a little more."""
    out = []
    stops = _stops("zh", rules)
    for run in _HAN_RUN.finditer(text):
        pos = run.start()
        for word in _exact_words(run.group(0)):
            if word not in stops and len(word) >= 2:
                out.append(_Term(word, word, 1.0 + 0.1 * min(len(word), 5), "content phrase", pos))
            pos += len(word)
    return out


_HAN_RUN = re.compile(r"\p{Han}+")


def _exact_words(run: str) -> List[str]:
    """jieba's words of ``run`` that tile it (search mode's extra sub-words left out)."""
    out, pos = [], 0
    for word in words(run):
        if run.startswith(word, pos):
            out.append(word)
            pos += len(word)
    return out


@lru_cache(maxsize=4096)
def _terms_cached(text: str, rules: "ContextRules") -> Tuple[_Term, ...]:
    return tuple(_en_terms(text, rules) + _zh_terms(text, rules))


def extract_terms(text: str, rules: Optional["ContextRules"] = None) -> Tuple[_Term, ...]:
    """Candidate topic terms of ``text`` (English words and Chinese phrases), in text order (memoised)."""
    return _terms_cached(text, DEFAULT_RULES if rules is None else rules) if text else ()


def _covered(term: _Term, question: str, question_keys: frozenset) -> bool:
    return term.key in question_keys or (HAN.match(term.key) is not None and term.key in question)


def _keys(turn: HistoryTurn, rules: "ContextRules") -> set:
    return {t.key for text in (turn.question, turn.answer) for t in extract_terms(text, rules)}


_NAMES = ("proper noun", "acronym")


def _repeats(terms: Sequence[_Term], cap: int, names_only: bool = True) -> Dict[str, int]:
    """Each term key of one text's ``terms`` with the times it counts (pure): a name (a key some occurrence of which is
    one of :data:`_NAMES`; a sentence's first word is not told apart) as often as the text holds it, at most ``cap``;
    any other term once (without ``names_only``: every term as often as the text holds it, at most ``cap``)."""
    counts: Dict[str, int] = {}
    names = set()
    for term in terms:
        counts[term.key] = counts.get(term.key, 0) + 1
        if term.label in _NAMES or not names_only:
            names.add(term.key)
    return {key: min(n, cap) if key in names else 1 for key, n in counts.items()}


def _names_subject(terms: Sequence[_Term], min_terms: int) -> bool:
    """Whether ``terms`` name a subject of their own (pure): a name (:data:`_NAMES`), a Chinese phrase (no capitals
    tell a Chinese name apart) or at least ``min_terms`` distinct content words."""
    return any(t.label in _NAMES or HAN.match(t.key) is not None for t in terms) or \
        len({t.key for t in terms}) >= min_terms




def _definite(text: str) -> bool:
    """Whether ``text`` holds "the" before a word ("the album", "the first stage", not "the same"): a definite noun
    phrase points back at something the conversation named."""
    tokens = words(text.lower())
    return any(t == "the" and nxt != "same" and nxt[:1].isalpha() for t, nxt in zip(tokens, tokens[1:]))


def _names_new(question: str, seen: set, rules: "ContextRules", share: float = 1.0, last: Optional[set] = None,
               min_terms: int = 0) -> Tuple[bool, bool]:
    """(names a term outside ``seen``, names only terms outside ``seen``: or, holding none of ``last``'s, its last
    sentence holding at least ``min_terms`` terms, ``share`` of them outside ``seen``, and no definite reference ("the
    movie": :func:`_definite`)) for a self-contained question."""
    own = {t.key for t in extract_terms(question, rules)}
    if not own:
        return False, False
    fresh = own - seen
    if fresh == own or last is None or own & last:
        return bool(fresh), fresh == own
    asked = (split_sentences(question) or [question])[-1]
    keys = {t.key for t in extract_terms(asked, rules)}
    mostly = len(keys) >= min_terms and len(keys - seen) >= share * len(keys) and not _definite(asked)
    return bool(fresh), bool(keys) and mostly


def contextualize(question: str, history: Sequence[HistoryTurn], rules: ContextRules = DEFAULT_RULES
                  ) -> Contextualized:
    """Expand ``question`` with salient, recent history terms under ``rules`` (pure; see the module docstring)."""
    if not isinstance(rules, ContextRules):
        raise ArgumentTypeError(f"rules must be a ContextRules, got {type(rules).__name__}")
    language = identify(question)
    if not rules_on(language):
        return Contextualized(question, question, (), False, False,
                              f"rules off: language {language!r} not supported (the follow-up as written)", rules=rules)
    decision = needs_rewrite(question)
    if not history:
        return Contextualized(question, question, (), False, False, "no history", rules=rules)
    # Walk the history once: the latest earlier turn that named its own subject (self-contained, with a term new
    # to the conversation) marks where the current topic state starts; terms before it are damped.
    seen: set = set()
    asked: set = set()  # term keys of the earlier questions
    last_shift = 0
    for i, turn in enumerate(history):
        if i and not needs_rewrite(turn.question).rewrite and _names_new(turn.question, seen, rules)[0]:
            last_shift = i
        seen |= _keys(turn, rules)
        asked |= {t.key for t in extract_terms(turn.question, rules)}
    question_keys = frozenset(t.key for t in extract_terms(question, rules))
    boosts, referent = _referents(question, decision.reason, history[-1], asked, question_keys, rules)
    known = seen if rules.shift_answers == "all" else asked | _keys(history[-1], rules)
    all_new = not decision.rewrite and _names_new(question, known, rules, rules.shift_new_share,
                                                   _keys(history[-1], rules), rules.shift_min_terms)[1]
    if referent is None and all_new and _names_subject(extract_terms(question, rules), rules.shift_min_terms):
        return Contextualized(question, question, (), False, True,
                              "topic shift: self-contained and names a subject new to the conversation", rules=rules)
    if referent is not None and referent.kind == "answer subject" and rules.referent_shift:
        last_shift = len(history)  # the follow-up points at what the last answer introduced: a new topic
    scores: Dict[str, float] = {}
    best: Dict[str, Tuple[float, _Term, int, str, bool]] = {}  # weight, term, turns back, reason, from an answer
    n = len(history)
    for i, turn in enumerate(history):
        back = n - i
        recency = rules.decay ** (back - 1)
        if i == 0:
            recency = max(recency, rules.anchor_weight)
        if i < last_shift:
            recency *= rules.shift_damping
        for text, source_weight, source in ((turn.question, 1.0, "question"),
                                            (turn.answer, rules.answer_weight, "answer")):
            terms = extract_terms(text, rules)
            repeats = _repeats(terms, rules.answer_repeat_cap if source == "answer" else 1)
            for term in terms:
                if term.key not in repeats or _covered(term, question, question_keys):
                    continue
                times = repeats.pop(term.key)  # once per text: the first mention carries the repeats
                w = term.salience * recency * source_weight * times
                scores[term.key] = scores.get(term.key, 0.0) + w
                if term.key not in best or w > best[term.key][0]:
                    said = f" ({times} mentions)" if times > 1 else ""
                    best[term.key] = (w, term, back, f"{term.label} in the {source} {back} turn(s) back{said}",
                                      source == "answer")
    for term, w in boosts:  # the referent's words, weighed by its rule
        scores[term.key] = scores.get(term.key, 0.0) + w
        best[term.key] = (w, term, 1, f"{referent.kind}: {referent.text!r} in the last turn", True)  # type: ignore
    ranked = sorted(((s, k) for k, s in scores.items() if s >= rules.min_weight), key=lambda sk: (-sk[0], sk[1]))
    chosen = ranked[:rules.max_terms]
    added = tuple(AddedTerm(best[k][1].surface, s, best[k][2], best[k][3]) for s, k in chosen)
    if not added:
        return Contextualized(question, question, (), decision.rewrite, False, "no salient history term",
                              rules=rules, referent=referent)
    # Terms read in conversation order (oldest turn first; in a turn, the question's before the answer's; then text
    # order) so phrases stay together.
    ordered = sorted(added, key=lambda a: (-a.turns_back, best[_key_of(a)][4], best[_key_of(a)][1].order))
    query = question.rstrip() + " " + " ".join(a.term for a in ordered)
    weight, why = _context_weight(question, decision.reason, len(question_keys), rules, all_new)
    reason = f"needs context ({decision.reason})" if decision.rewrite else "looks self-contained"
    if referent is not None:
        reason += f"; {referent.kind} {referent.text!r}"
    return Contextualized(question, query, added, decision.rewrite, False, f"{reason}; {why}", 1.0, weight, rules,
                          referent)


_REFERRING = ("pronoun", "reference word")


def _referents(question: str, trigger: str, last: HistoryTurn, asked: set, question_keys: frozenset,
               rules: ContextRules) -> Tuple[List[Tuple[_Term, float]], Optional[Referent]]:
    """The terms of what ``question`` points at in the ``last`` turn, each with its weight, and that referent (pure):

    * a list item ("the second one", 后者: :func:`~.referents.item_reference`) of the last answer's list (else the
      last question's: "A or B?"), weighing ``list_item_weight`` x salience;
    * else, for a question that refers with a pronoun to what the last question asked for (he after who, it after
      which: :func:`~.referents.refers_to_answer`), the name the last answer introduced (not in any earlier question
      nor in this one; the most repeated, then the first), weighing ``answer_subject_weight`` x salience.
    """
    positions = item_reference(question, rules.referents) if rules.list_item_weight > 0 else None
    if positions is not None:
        for text in (last.answer, last.question):
            chosen = pick(list_items(text, rules.referents), positions)
            if chosen:
                # a one-character Chinese item ("狗") holds no two-character phrase: the item itself
                terms = [t for item in chosen for t in (extract_terms(item, rules) or (
                    (_Term(item, item, 1.0, "list item"),) if HAN.match(item) is not None else ()))]
                fresh = [t for t in terms if t.key not in question_keys]
                return [(t, rules.list_item_weight * t.salience) for t in fresh], \
                    Referent("list item", " / ".join(chosen))
    # in a language without reference lists (German, French ...), a short follow-up stands for its pronoun
    listed = identify(question) in ("en", "zh")
    referring = trigger.startswith(_REFERRING) or (not listed and trigger.startswith("short follow-up"))
    if rules.answer_subject_weight <= 0 or not referring or \
            not refers_to_answer(question, last.question, any_pronoun=not listed, rules=rules.referents):
        return [], None
    # names, and capitalised words at a sentence's start ("Galileo discovered them."); the referent is new to the
    # questions, the most repeated, then the first (an answer names its subject first)
    said = extract_terms(last.answer, rules)
    names = [t for t in said if t.label in _NAMES or t.surface[0].isupper() or HAN.match(t.key) is not None]
    fresh = [t for t in names if t.key not in asked and not _covered(t, question, question_keys)]
    if not fresh:
        return [], None
    counts = _repeats(fresh, len(fresh), names_only=False)
    top = max(fresh, key=lambda t: (counts[t.key], -t.order))
    phrase = _run_around(top, names, last.answer)
    return [(t, rules.answer_subject_weight * t.salience) for t in phrase if not _covered(t, question, question_keys)], \
        Referent("answer subject", " ".join(t.surface for t in phrase))


def _run_around(top: _Term, names: Sequence[_Term], text: str) -> List[_Term]:
    """``top`` with the names written right before and after it in ``text`` ("Edwin Hubble", "Moto G7 Power")."""
    if HAN.match(top.key) is not None:
        return [top]
    run = [top]
    at = names.index(top)
    for step in (-1, 1):
        i = at + step
        while 0 <= i < len(names):
            left, right = (names[i], run[0]) if step < 0 else (run[-1], names[i])
            if text[left.order + len(left.surface):right.order].strip() or right.order <= left.order:
                break  # anything but spaces in between (a word, a full stop): the run ends
            run.insert(0, names[i]) if step < 0 else run.append(names[i])
            i += step
    return run


def _context_weight(question: str, trigger: str, own_terms: int, rules: ContextRules,
                    all_new: bool = False) -> Tuple[float, str]:
    """The expanded list's fusion weight (the question's own list weighs 1) and why (pure).

    A follow-up that says little itself ("How fast did it go?": one content word) leans on the expansion, one that
    says much ("Is there a relationship between these values and mental illness?") on its own words:
    ``context_scale / own_terms``, at most ``max_context_weight``. A follow-up naming its own subject (a proper noun, an acronym, or the new
    subject of an ellipsis: "What about the moon?", "北京呢？") keeps history as a light prior: at most
    ``named_subject_weight``. (A number names no subject: "What happened in 1983?" still needs one.) A self-contained
    follow-up whose words are all new to the conversation (``all_new``) but name no subject (not a topic shift, see
    :func:`_names_subject`) gets the same light prior: "How's the sector managed?" may mean the conversation's sector,
    or a new subject.
    """
    weight = min(rules.max_context_weight, rules.context_scale / max(own_terms, 1))
    named_weight = rules.named_subject_weight
    terms = extract_terms(question, rules)
    named = next((t.surface for t in terms if t.label in _NAMES), None)
    if named is None and trigger in ("ellipsis", "elliptical ending") and terms:
        named = terms[-1].surface
    if named is not None and weight > named_weight:
        return named_weight, f"names its own subject {named!r}: history as a light prior"
    if all_new and weight > named_weight:
        return named_weight, "only words new to the conversation: history as a light prior"
    return weight, f"{own_terms} own content term(s): expansion weight {weight:.2f}"


def mentions(text: str, terms: Sequence[str]) -> bool:
    """Whether ``text`` holds one of ``terms`` (English: as a word, case-, plural- and possessive-folded; Chinese:
    as a substring)."""
    cjk = [t for t in terms if t and HAN.match(t) is not None]
    if any(t in text for t in cjk):
        return True
    keys = {fold(t) for t in terms if t and not HAN.match(t)}
    lower = text.lower()
    # every folded form holds its key, less a final 'y' ('companies' -> 'company'): the regex runs on a substring hit
    if not any((k[:-1] if k.endswith("y") else k) in lower for k in keys if k):
        return False
    pattern = _mention_pattern(tuple(sorted(keys)))
    return pattern is not None and pattern.search(text) is not None


@lru_cache(maxsize=1024)
def _mention_pattern(keys: Tuple[str, ...]) -> Optional["re.Pattern[str]"]:
    """One regex for the words :func:`fold` folds onto ``keys`` (plural, possessive,
    -ies), case-insensitive."""
    forms = []
    for k in keys:
        if not k:
            continue
        forms.append(re.escape(k) + "s?")
        if k.endswith("y"):
            forms.append(re.escape(k[:-1]) + "ies")
    if not forms:
        return None
    return re.compile(r"(?<![\w'’-])(?:" + "|".join(forms) + r")(?:['’]s)?(?![\w'’-])", re.IGNORECASE)


def history_turns(messages: Sequence[object]) -> List[HistoryTurn]:
    """Chat messages (``role``, ``content``) grouped into user turns: each question with the answers after it."""
    turns: List[HistoryTurn] = []
    for m in messages:
        role = str(getattr(getattr(m, "role", None), "value", getattr(m, "role", "")))
        text = str(getattr(m, "content", "") or "")
        if role == "user":
            turns.append(HistoryTurn(text))
        elif turns and text:
            last = turns[-1]
            turns[-1] = HistoryTurn(last.question, (last.answer + "\n" + text).strip())
    return turns


def _key_of(term: AddedTerm) -> str:
    return term.term if term.term and HAN.match(term.term) else fold(term.term)
