"""Word folding shared by the no-LLM text rules (extractive sentence scoring, the contextual rewrite): pure.

:func:`fold` compares a word across case, possessive and plural (``Sharks's`` -> ``shark``, ``companies`` ->
``company``); :func:`stem` also cuts a verb's ``-ing`` / ``-ed`` and maps a few irregular forms (``wrote``,
``written`` -> ``writ``); :data:`CJK_RUN` finds runs of Chinese characters.
"""

from __future__ import annotations

import re

CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
"""A run of CJK ideographs (Chinese text has no spaces between words)."""

_VERB_SUFFIX = re.compile(r"(?<=[a-z]{3})(?:ing|ed)$")
IRREGULAR = {"wrote": "writ", "written": "writ", "writes": "writ", "write": "writ", "writer": "writ", "hidden": "hid",
             "hide": "hid", "made": "mak", "make": "mak", "makes": "mak", "built": "build", "won": "win", "wins": "win"}
"""Irregular forms :func:`stem` maps onto one stem."""


def fold(word: str) -> str:
    """``word`` lower-cased, without a possessive ``'s`` or edge quotes and hyphens, a plural made singular (``-ies``
    -> ``-y`` past four letters; ``-s`` past three, not ``-ss``, ``-us``, ``-is``)."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.strip("'-")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def stem(word: str) -> str:
    """A light English stem: an irregular form of :data:`IRREGULAR`, else :func:`fold` less ``-ing`` / ``-ed`` after
    three letters (``listing``, ``listed``, ``lists`` -> ``list``); a command-line option (``--all``) only
    lower-cased."""
    low = word.lower()
    if low.startswith("-"):
        return low
    return IRREGULAR.get(low) or _VERB_SUFFIX.sub("", fold(low))
