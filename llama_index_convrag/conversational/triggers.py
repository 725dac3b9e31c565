"""A pure rule deciding whether a follow-up needs rewriting: pronouns, ellipsis, very short questions (EN + ZH).

Self-contained questions skip the rewrite, so they cost no LLM call. The rule errs towards rewriting: a false
positive costs one condense call, a false negative only keeps the user's own (self-contained-looking) words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, NamedTuple, Tuple

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.text import HAN, holds_phrase, identify, rules_on, terms, words


@dataclass(frozen=True)
class TriggerRules:
    """The words and lengths the trigger reads (checked once, here). Each decides whether a follow-up is rewritten
    with the conversation: ``bench/conversational_retrieval.py`` (``ctx-fuse``, CAsT 2021 / 2022 and CANARD, both
    halves) and ``bench/text_languages.py`` (the follow-ups of eight languages) measure the rewrite they gate;
    ``tests/conversational/test_triggers.py`` holds the questions."""

    pronouns: FrozenSet[str] = frozenset(
        "it its itself they them their theirs themselves this these those he him his she her hers one ones "
        "former latter there then such same above aforementioned".split())
    """English words that point back ("that" is not one: it is as often a relative pronoun, "the gene that causes ...";
    a short follow-up that says "that" is caught by its length). Measured: ``bench/conversational_retrieval.py``
    (``ctx-fuse``, per set and ``--split dev|test``), ``bench/text_languages.py`` and
    ``tests/conversational/test_triggers.py``."""
    ellipsis: Tuple[str, ...] = (
        "^what about", "^how about", "^and", "^also", "^what else", "^why not", "^any other", "^anything else",
        "^more", "^tell me more", "^same", "^compared to", "^what if", "^then", "^so", "^but", "呢$", "吗$")
    """Openings and endings of an elliptical follow-up ("What about Germany?", "那上海呢？"). Measured:
    ``bench/conversational_retrieval.py`` (``ctx-fuse``, per set and ``--split dev|test``),
    ``bench/text_languages.py`` and ``tests/conversational/test_triggers.py``."""
    zh_references: Tuple[str, ...] = (
        "它们", "它", "他们", "她们", "他", "她", "那个", "这个", "那些", "这些", "前者", "后者", "这部", "那部",
        "这位", "那位", "这本", "那本", "这种", "那种", "这家", "那家", "该", "其", "此", "上述", "刚才", "之前",
        "上面", "同样", "还有")
    """Chinese words that point back, matched as jieba's words (该 of 应该, 其 of 其他 are not). Measured:
    ``bench/conversational_retrieval.py`` (``ctx-fuse``, per set and ``--split dev|test``),
    ``bench/text_languages.py`` and ``tests/conversational/test_triggers.py``."""
    max_short_words: int = 3
    """A follow-up of at most this many words (content terms in a language without these lists) needs the conversation.
    Measured: ``bench/conversational_retrieval.py`` (``ctx-fuse``, per set and ``--split dev|test``),
    ``bench/text_languages.py`` and ``tests/conversational/test_triggers.py``."""
    max_short_cjk: int = 6
    """A Chinese follow-up of at most this many characters needs the conversation (twice this with an elliptical
    ending). Measured: ``bench/conversational_retrieval.py`` (``ctx-fuse``, per set and ``--split dev|test``),
    ``bench/text_languages.py`` and ``tests/conversational/test_triggers.py``."""

    def __post_init__(self) -> None:
        for name in ("max_short_words", "max_short_cjk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be an int >= 0, got {value!r}")


DEFAULT_TRIGGER_RULES = TriggerRules()


class TriggerDecision(NamedTuple):
    """Whether to rewrite, and the rule that decided."""

    rewrite: bool
    reason: str


def needs_rewrite(question: str, rules: TriggerRules = DEFAULT_TRIGGER_RULES) -> TriggerDecision:
    """Decide whether ``question`` depends on the conversation (pure; English and Chinese)."""
    text = question.strip()
    if not text:
        return TriggerDecision(False, "empty question")
    cjk = HAN.findall(text)
    language = identify(text)
    if language not in ("en", "zh"):
        return _by_length(text, language, rules.max_short_words)
    ellipsis = any(holds_phrase(text, cue) for cue in rules.ellipsis)
    if cjk:
        found = set(words(text))  # jieba's words: 该 of 应该, 其 of 其他 and 此 of 因此 are not references
        for ref in rules.zh_references:
            if ref in found:
                return TriggerDecision(True, f"reference word {ref!r}")
        if ellipsis and len(cjk) <= 2 * rules.max_short_cjk:
            return TriggerDecision(True, "elliptical ending")
        if len(cjk) <= rules.max_short_cjk:
            return TriggerDecision(True, f"short follow-up ({len(cjk)} characters)")
    tokens = [w for w in words(text.lower()) if not HAN.match(w)]
    for w in tokens:
        if w in rules.pronouns:
            return TriggerDecision(True, f"pronoun {w!r}")
    if ellipsis or text.endswith(("...", "…")):
        return TriggerDecision(True, "ellipsis")
    if not cjk and len(tokens) <= rules.max_short_words:
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
