"""What a follow-up points at in the previous turn, by rules (pure, EN + ZH): an item of a list, a name the answer gave.

* :func:`item_reference`: "the first one", "the second", "the last", "the latter", "number 2", "both", 前者 / 后者 /
  第二个 / 最后一个 / 两者 -> which items of a list (0-based positions, ``-1`` = the last).
* :func:`list_items`: the enumerated items of a text: numbered or bulleted lines, an inline comma list ("A, B and C"),
  a Chinese 、 list, or a two-way choice in a short text ("A or B?", "A还是B").
* :func:`refers_to_answer`: whether a pronoun of the follow-up can mean the name the answer to the previous question
  gave: "he" after who / 谁 (a person), "it" after which / 哪个 (a thing).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import FrozenSet, Optional, Tuple

import regex as re

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.text import HAN, split_sentences, words


@dataclass(frozen=True)
class ReferentRules:
    """The words the referent rules read (checked once, here). ``bench/conversational_retrieval.py --followups``
    measures the rules they serve (the list item, the answer's subject) off and on, per half of CAsT 2021 / 2022 and
    CANARD, and ``tests/conversational/test_followups.py`` holds the written dialogues."""

    ordinals: Tuple[Tuple[str, int], ...] = (("first", 0), ("second", 1), ("third", 2), ("fourth", 3),
                                               ("fifth", 4), ("sixth", 5), ("last", -1), ("former", 0),
                                               ("latter", -1))
    """English ordinal words and the list position each means ("the second one": 1; -1 is the last). Measured:
    ``bench/conversational_retrieval.py --followups`` (the rule on and off, per half of CAsT 2021 / 2022 and CANARD)
    and ``tests/conversational/test_followups.py``."""
    person_pronouns: FrozenSet[str] = frozenset("he him his she her hers they them their theirs 他 她".split())
    """Pronouns that can mean a person the last answer named (after a "who" question). Measured:
    ``bench/conversational_retrieval.py --followups`` (the rule on and off, per half of CAsT 2021 / 2022 and CANARD)
    and ``tests/conversational/test_followups.py``."""
    thing_pronouns: FrozenSet[str] = frozenset("it its they them their theirs that this these those one 它 这 那".split())
    """Pronouns that can mean a thing the last answer named (after a "which" question). Measured:
    ``bench/conversational_retrieval.py --followups`` (the rule on and off, per half of CAsT 2021 / 2022 and CANARD)
    and ``tests/conversational/test_followups.py``."""
    person_questions: FrozenSet[str] = frozenset("who whom whose 谁 哪位 什么人".split())
    """Question words asking for a person. Measured: ``bench/conversational_retrieval.py --followups`` (the rule on and
    off, per half of CAsT 2021 / 2022 and CANARD) and ``tests/conversational/test_followups.py``."""
    thing_questions: FrozenSet[str] = frozenset("which 哪个 哪家 哪部 哪本 哪首 哪些".split())
    """Question words asking for a thing. Measured: ``bench/conversational_retrieval.py --followups`` (the rule on and
    off, per half of CAsT 2021 / 2022 and CANARD) and ``tests/conversational/test_followups.py``."""
    max_item_words: int = 6
    """An inline list's item holds at most this many words (longer pieces are clauses, not items). Measured:
    ``bench/conversational_retrieval.py --followups`` (the rule on and off, per half of CAsT 2021 / 2022 and CANARD)
    and ``tests/conversational/test_followups.py``."""
    max_item_chars: int = 12
    """A Chinese inline item holds at most this many characters. Measured: ``bench/conversational_retrieval.py
    --followups`` (the rule on and off, per half of CAsT 2021 / 2022 and CANARD) and
    ``tests/conversational/test_followups.py``."""

    def __post_init__(self) -> None:
        for name in ("max_item_words", "max_item_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")


DEFAULT_REFERENT_RULES = ReferentRules()
_HEADS = r"one|ones|item|option|point|step|choice|thing|kind|type|answer|suggestion|idea|method|way|place|book|film"
_EN_ORDINAL = re.compile(
    r"\bthe\s+(first|second|third|fourth|fifth|sixth|last|former|latter)\b(?:\s+(?:" + _HEADS + r")\b|"
    r"(?=\s*(?:[?.!,;:)]|$|\b(?:you|mentioned|listed|on|in|of those|of them|from)\b)))", re.IGNORECASE)
_EN_NUMBER = re.compile(r"\b(?:number|item|option|point|step|no\.|#)\s*(\d{1,2})\b", re.IGNORECASE)
_EN_BOTH = re.compile(r"\bboth(?:\s+of\s+(?:them|those|these))?(?=\s*(?:[?.!,;]|$))|\bboth\s+of\s+(?:them|those|these)\b",
                      re.IGNORECASE)
_ZH_ORDINAL = re.compile(r"第(\p{Numeric_Type=Numeric}|\d{1,2})(?:个|种|条|点|项|位|部|本|家|款|首|款|类|步)")
_ZH_LAST = re.compile(r"最后(?:一|那)?(?:个|种|条|点|项|位|部|本|家|款|首|类)")
_BULLET = re.compile(r"^\s*(?:\(?\d{1,2}[.)、．]|[-*•·●]|\(?[a-h]\))\s*(.+?)\s*$")
_EN_LIST = re.compile(r",\s*(?:and|or)\s+|\s+(?:and|or)\s+|,\s*", re.IGNORECASE)
_ZH_JOINERS = re.compile(r"以及|还是|或者|和|与|及")


@dataclass(frozen=True)
class Referent:
    """What the follow-up resolved to: ``kind`` (``"list item"`` or ``"answer subject"``) and the ``text`` added."""

    kind: str
    text: str


def item_reference(question: str, rules: ReferentRules = DEFAULT_REFERENT_RULES) -> Optional[Tuple[int, ...]]:
    """The list positions ``question`` points at (0-based, ``-1`` = the last; "both" = ``(0, 1)``), or ``None``."""
    ordinals = dict(rules.ordinals)
    m = _EN_ORDINAL.search(question)
    if m:
        return (ordinals[m.group(1).lower()],)
    bare = next((w for w in words(question.lower()) if w in ("former", "latter")), None)
    if bare is not None:
        return (ordinals[bare],)
    m = _EN_NUMBER.search(question)
    if m and int(m.group(1)) >= 1:
        return (int(m.group(1)) - 1,)
    if "前者" in question:
        return (0,)
    if "后者" in question or _ZH_LAST.search(question):
        return (-1,)
    m = _ZH_ORDINAL.search(question)
    if m:
        value = int(unicodedata.numeric(m.group(1), 0))  # 第二个: 2; 两, 零 are no ordinal
        return (value - 1,) if value >= 1 else None
    if _EN_BOTH.search(question) or "两者" in question or "两个都" in question:
        return (0, 1)
    return None


def list_items(text: str, rules: ReferentRules = DEFAULT_REFERENT_RULES) -> Tuple[str, ...]:
    """The enumerated items of ``text``: its numbered or bulleted lines (each up to a ``:``), else the longest inline
    list of a sentence (``A, B and C`` in English, ``A、B和C`` in Chinese; two English items ``A or B`` / ``A, and B``
    or ``A还是B`` only in a text of one sentence), each item short (``rules.max_item_words``, ``rules.max_item_chars``);
    ``()`` when none."""
    lines = [m.group(1) for m in map(_BULLET.match, text.splitlines()) if m]
    if len(lines) >= 2:
        return tuple(re.split(r"[:：]\s|\s[-–—]\s", line, maxsplit=1)[0].strip(" .。") for line in lines)
    sentences = [p for x in split_sentences(text) for p in x.replace("；", ";").split(";") if p.strip()]
    lists = [items for items in (_inline(x.strip().rstrip(".!?。！？"), single=len(sentences) == 1, rules=rules)
                                 for x in sentences) if len(items) >= 2]
    return max(lists, key=len) if lists else ()  # the longest enumeration (the first of equals)


def _inline(sentence: str, single: bool, rules: ReferentRules) -> Tuple[str, ...]:
    if HAN.search(sentence):
        if "、" not in sentence and not single:
            return ()
        pieces = [p.strip() for p in sentence.replace("，", "、").replace(",", "、").split("、")]
        parts = pieces[:-1] + [p.strip() for p in _ZH_JOINERS.split(pieces[-1], maxsplit=1)]
        items = [p for p in parts[1:-1] if p]
        if len(parts) < 2 or any(len(p) > rules.max_item_chars for p in items):
            return ()
        last = parts[-1]
        if not last or len(last) > rules.max_item_chars:
            return ()
        width = max(len(p) for p in (*items, last))
        return (parts[0][-width:], *items, last)
    if "," not in sentence and not single:
        return ()
    parts = [p.strip() for p in _EN_LIST.split(sentence)]
    if len(parts) < 2 or not (re.search(r"\b(?:and|or)\s+\S+[^,]*$", sentence, re.IGNORECASE)):
        return ()
    middle, last = parts[1:-1], parts[-1]
    if any(len(p.split()) > rules.max_item_words for p in (*middle, last)) or not all(p for p in (*middle, last)):
        return ()
    if not middle and not single:
        return ()  # "X, and Y" in running text joins clauses; a list there names three or more
    width = max(len(p.split()) for p in (*middle, last))
    first = " ".join(parts[0].split()[-width:])
    return (first, *middle, last)


def pick(items: Tuple[str, ...], positions: Tuple[int, ...]) -> Tuple[str, ...]:
    """The items at ``positions`` (see :func:`item_reference`), ``()`` when one is out of range."""
    try:
        return tuple(dict.fromkeys(items[p] for p in positions))
    except IndexError:
        return ()


def refers_to_answer(question: str, previous: str, any_pronoun: bool = False,
                     rules: ReferentRules = DEFAULT_REFERENT_RULES) -> bool:
    """Whether a pronoun of ``question`` can mean the name the answer to ``previous`` gave (pure): ``previous`` asked
    for a person (who / whom / whose, 谁 / 哪位 / 什么人) and ``question`` says he / she / they / 他 / 她, or it asked
    for a thing (which, 哪个 / 哪家 / ...) and ``question`` says it / they / that / 它 / 这 / 那. "Who directed
    Inception?" -> "When was it released?": 'it' is still the film. With ``any_pronoun`` (a follow-up in a language
    without these pronoun lists, short enough to need the conversation) only ``previous`` is read."""
    said = set(words(question.lower()))
    asked = set(words(previous.lower()))
    person, thing = rules.person_pronouns, rules.thing_pronouns
    if any_pronoun:
        said |= person | thing
    if asked & rules.person_questions or any(w in previous for w in rules.person_questions if HAN.match(w)):
        return bool(said & person) or any(p in question for p in person if HAN.match(p))
    if asked & rules.thing_questions or any(w in previous for w in rules.thing_questions if HAN.match(w)):
        return bool(said & thing) or any(p in question for p in thing if HAN.match(p))
    return False
