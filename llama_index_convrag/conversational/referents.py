"""What a follow-up points at in the previous turn, by rules (pure, EN + ZH): an item of a list, a name the answer gave.

* :func:`item_reference`: "the first one", "the second", "the last", "the latter", "number 2", "both", 前者 / 后者 /
  第二个 / 最后一个 / 两者 -> which items of a list (0-based positions, ``-1`` = the last).
* :func:`list_items`: the enumerated items of a text: numbered or bulleted lines, an inline comma list ("A, B and C"),
  a Chinese 、 list, or a two-way choice in a short text ("A or B?", "A还是B").
* :func:`refers_to_answer`: whether a pronoun of the follow-up can mean the name the answer to the previous question
  gave: "he" after who / 谁 (a person), "it" after which / 哪个 (a thing).
"""

from __future__ import annotations

import regex as re
from dataclasses import dataclass
from typing import Optional, Tuple

_EN_ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "sixth": 5, "last": -1,
                "former": 0, "latter": -1}
_ZH_NUMBERS = {"一": 0, "二": 1, "两": 1, "三": 2, "四": 3, "五": 4, "六": 5, "七": 6, "八": 7, "九": 8, "十": 9}
_HEADS = r"one|ones|item|option|point|step|choice|thing|kind|type|answer|suggestion|idea|method|way|place|book|film"
_EN_ORDINAL = re.compile(
    r"\bthe\s+(first|second|third|fourth|fifth|sixth|last|former|latter)\b(?:\s+(?:" + _HEADS + r")\b|"
    r"(?=\s*(?:[?.!,;:)]|$|\b(?:you|mentioned|listed|on|in|of those|of them|from)\b)))", re.IGNORECASE)
_EN_BARE = re.compile(r"\b(former|latter)\b", re.IGNORECASE)
_EN_NUMBER = re.compile(r"\b(?:number|item|option|point|step|no\.|#)\s*(\d{1,2})\b", re.IGNORECASE)
_EN_BOTH = re.compile(r"\bboth(?:\s+of\s+(?:them|those|these))?(?=\s*(?:[?.!,;]|$))|\bboth\s+of\s+(?:them|those|these)\b",
                      re.IGNORECASE)
_ZH_ORDINAL = re.compile(r"第([一二两三四五六七八九十]|\d{1,2})(?:个|种|条|点|项|位|部|本|家|款|首|款|类|步)")
_ZH_LAST = re.compile(r"最后(?:一|那)?(?:个|种|条|点|项|位|部|本|家|款|首|类)")
_BULLET = re.compile(r"^\s*(?:\(?\d{1,2}[.)、．]|[-*•·●]|\(?[a-h]\))\s*(.+?)\s*$")
_WH_ENTITY = re.compile(r"\b(?:who|whom|whose|which)\b", re.IGNORECASE)
_PERSON_WH = re.compile(r"\b(?:who|whom|whose)\b", re.IGNORECASE)
_WORDS = re.compile(r"[a-z']+")
_PERSON_PRONOUNS = frozenset("he him his she her hers they them their theirs".split())
_THING_PRONOUNS = frozenset("it its they them their theirs that this these those one".split())
_ZH_WH_ENTITY = ("谁", "哪个", "哪位", "哪家", "哪部", "哪本", "哪首", "哪些", "什么人")
_SENTENCES = re.compile(r"[^.!?。！？；;\n]+")
_EN_LIST = re.compile(r",\s*(?:and|or)\s+|\s+(?:and|or)\s+|,\s*", re.IGNORECASE)
_ZH_SEPARATORS = re.compile(r"、|，|,")
_ZH_JOINERS = re.compile(r"以及|还是|或者|和|与|及")
MAX_ITEM_WORDS = 6
"""An inline list's item holds at most this many words (longer pieces are clauses, not items)."""
MAX_ITEM_CHARS = 12
"""A Chinese inline item holds at most this many characters."""


@dataclass(frozen=True)
class Referent:
    """What the follow-up resolved to: ``kind`` (``"list item"`` or ``"answer subject"``) and the ``text`` added."""

    kind: str
    text: str


def item_reference(question: str) -> Optional[Tuple[int, ...]]:
    """The list positions ``question`` points at (0-based, ``-1`` = the last; "both" = ``(0, 1)``), or ``None``."""
    for pattern in (_EN_ORDINAL, _EN_BARE):
        m = pattern.search(question)
        if m:
            return (_EN_ORDINALS[m.group(1).lower()],)
    m = _EN_NUMBER.search(question)
    if m and int(m.group(1)) >= 1:
        return (int(m.group(1)) - 1,)
    if "前者" in question:
        return (0,)
    if "后者" in question or _ZH_LAST.search(question):
        return (-1,)
    m = _ZH_ORDINAL.search(question)
    if m:
        n = m.group(1)
        return (int(n) - 1 if n.isdigit() else _ZH_NUMBERS[n],)
    if _EN_BOTH.search(question) or "两者" in question or "两个都" in question:
        return (0, 1)
    return None


def list_items(text: str) -> Tuple[str, ...]:
    """The enumerated items of ``text``: its numbered or bulleted lines (each up to a ``:``), else the longest inline
    list of a sentence (``A, B and C`` in English, ``A、B和C`` in Chinese; two English items ``A or B`` / ``A, and B``
    or ``A还是B`` only in a text of one sentence), each item short (:data:`MAX_ITEM_WORDS`, :data:`MAX_ITEM_CHARS`); ``()`` when none."""
    lines = [m.group(1) for m in map(_BULLET.match, text.splitlines()) if m]
    if len(lines) >= 2:
        return tuple(re.split(r"[:：]\s|\s[-–—]\s", line, maxsplit=1)[0].strip(" .。") for line in lines)
    sentences = _SENTENCES.findall(text)
    lists = [items for items in (_inline(x.strip(), single=len(sentences) == 1) for x in sentences) if len(items) >= 2]
    return max(lists, key=len) if lists else ()  # the longest enumeration (the first of equals)


def _inline(sentence: str, single: bool) -> Tuple[str, ...]:
    if re.search(r"\p{Han}", sentence):
        if "、" not in sentence and not single:
            return ()
        pieces = [p.strip() for p in _ZH_SEPARATORS.split(sentence)]
        parts = pieces[:-1] + [p.strip() for p in _ZH_JOINERS.split(pieces[-1], maxsplit=1)]
        items = [p for p in parts[1:-1] if p]
        if len(parts) < 2 or any(len(p) > MAX_ITEM_CHARS for p in items):
            return ()
        last = parts[-1]
        if not last or len(last) > MAX_ITEM_CHARS:
            return ()
        width = max(len(p) for p in (*items, last))
        return (parts[0][-width:], *items, last)
    if "," not in sentence and not single:
        return ()
    parts = [p.strip() for p in _EN_LIST.split(sentence)]
    if len(parts) < 2 or not (re.search(r"\b(?:and|or)\s+\S+[^,]*$", sentence, re.IGNORECASE)):
        return ()
    middle, last = parts[1:-1], parts[-1]
    if any(len(p.split()) > MAX_ITEM_WORDS for p in (*middle, last)) or not all(p for p in (*middle, last)):
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


def refers_to_answer(question: str, previous: str, any_pronoun: bool = False) -> bool:
    """Whether a pronoun of ``question`` can mean the name the answer to ``previous`` gave (pure): ``previous`` asked
    for a person (who / whom / whose, 谁 / 哪位 / 什么人) and ``question`` says he / she / they / 他 / 她, or it asked
    for a thing (which, 哪个 / 哪家 / ...) and ``question`` says it / they / that / 它 / 这 / 那. "Who directed
    Inception?" -> "When was it released?": 'it' is still the film. With ``any_pronoun`` (a follow-up in a language
    without these pronoun lists, short enough to need the conversation) only ``previous`` is read."""
    words = set(_WORDS.findall(question.lower()))
    if any_pronoun:
        words |= _PERSON_PRONOUNS | _THING_PRONOUNS
    if _PERSON_WH.search(previous) or any(w in previous for w in ("谁", "哪位", "什么人")):
        return bool(words & _PERSON_PRONOUNS) or any(w in question for w in ("他", "她"))
    if _WH_ENTITY.search(previous) or any(w in previous for w in _ZH_WH_ENTITY):
        return bool(words & _THING_PRONOUNS) or any(w in question for w in ("它", "这", "那"))
    return False
