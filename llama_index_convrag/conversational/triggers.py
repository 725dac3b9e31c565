"""A pure rule deciding whether a follow-up needs rewriting: pronouns, ellipsis, very short questions (EN + ZH).

Self-contained questions skip the rewrite, so they cost no LLM call. The rule errs towards rewriting: a false
positive costs one condense call, a false negative only keeps the user's own (self-contained-looking) words.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from llama_index_convrag.text import HAN, identify, rules_on, terms, words

EN_PRONOUNS = frozenset(
    "it its itself they them their theirs themselves this these those he him his she her hers one ones "
    "former latter there then such same above aforementioned".split()
)
"""English words that point back ("that" is not one: it is as often a relative pronoun, "the gene that causes ...";
a short follow-up that says "that" is caught by its length)."""
EN_ELLIPSIS_STARTS = (
    "what about", "how about", "and ", "also ", "what else", "why not", "any other", "anything else", "more ",
    "tell me more", "same ", "compared to", "what if", "then ", "so ", "but ",
)
ZH_REFERENCES = (
    "它们", "它", "他们", "她们", "他", "她", "那个", "这个", "那些", "这些", "前者", "后者", "这部", "那部",
    "这位", "那位", "这本", "那本", "这种", "那种", "这家", "那家", "该", "其", "此", "上述", "刚才", "之前",
    "上面", "同样", "还有",
)
ZH_ELLIPSIS_ENDS = ("呢", "呢？", "呢?", "吗？", "吗?")
_WORD = re.compile(r"[A-Za-z0-9']+")


class TriggerDecision(NamedTuple):
    """Whether to rewrite, and the rule that decided."""

    rewrite: bool
    reason: str


def needs_rewrite(question: str, *, max_short_words: int = 3, max_short_cjk: int = 6) -> TriggerDecision:
    """Decide whether ``question`` depends on the conversation (pure; English and Chinese)."""
    text = question.strip()
    if not text:
        return TriggerDecision(False, "empty question")
    cjk = HAN.findall(text)
    language = identify(text)
    if language not in ("en", "zh"):
        return _by_length(text, language, max_short_words)
    if cjk:
        found = set(words(text))  # jieba's words: 该 of 应该, 其 of 其他 and 此 of 因此 are not references
        for ref in ZH_REFERENCES:
            if ref in found:
                return TriggerDecision(True, f"reference word {ref!r}")
        if text.endswith(ZH_ELLIPSIS_ENDS) and len(cjk) <= 2 * max_short_cjk:
            return TriggerDecision(True, "elliptical ending")
        if len(cjk) <= max_short_cjk:
            return TriggerDecision(True, f"short follow-up ({len(cjk)} characters)")
    lower = text.lower()
    tokens = _WORD.findall(lower)
    for w in tokens:
        if w in EN_PRONOUNS:
            return TriggerDecision(True, f"pronoun {w!r}")
    if lower.startswith(EN_ELLIPSIS_STARTS) or lower.endswith(("...", "…")):
        return TriggerDecision(True, "ellipsis")
    if not cjk and len(tokens) <= max_short_words:
        return TriggerDecision(True, f"short follow-up ({len(tokens)} words)")
    return TriggerDecision(False, "self-contained")


def _by_length(text: str, language: str, max_short_words: int) -> TriggerDecision:
    """A follow-up in a language without reference lists: it needs the conversation when it holds at most
    ``max_short_words`` content terms (its language's stop words, pronouns among them, dropped: "Wie alt ist er?"
    holds one); the rules are off for a language they do not support."""
    if not rules_on(language):
        return TriggerDecision(False, f"rules off: language {language!r} not supported")
    own = terms(text, language)
    if len(own) <= max_short_words:
        return TriggerDecision(True, f"short follow-up ({len(own)} content terms)")
    return TriggerDecision(False, "self-contained")
