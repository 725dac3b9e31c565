"""Clean a model's condense-rewrite reply into one retrieval question, or reject it with a reason (pure, EN + ZH).

Real models do not always reply with the question only. They prefix labels ("Standalone question:", "改写后的问题："),
wrap the question in quotes, markdown or code fences, add a preamble line ("Sure! Here is the rewritten
question:"), write several lines (the question, then an explanation or an answer), refuse, or answer the follow-up
instead of rewriting it, or repeat an earlier question of the conversation (Qwen2.5-0.5B answered "What other films
did he direct?" after "Who directed Inception?" with "Who directed Inception?"). :func:`parse_rewrite` undoes the
wrapping, keeps the question line of a multi-line reply and records each step (``"unchanged"`` when the reply is the
follow-up itself); it rejects (``query=None`` with a reason) refusals, over-long replies, statements given for a
question ("looks like an answer") and repeats of an earlier user question.
"""

from __future__ import annotations

import re
import unicodedata
from typing import List, NamedTuple, Optional, Sequence, Tuple

from llama_index_convrag.text import has_cjk, words

#: Longer cleaned replies are answers or essays, not retrieval questions.
MAX_REWRITE_CHARS = 400

_FENCE = re.compile(r"^```[\w-]*[ \t]*\n?(.*?)\n?```$", re.DOTALL)
_LABEL = re.compile(
    r"^[*_#\s]*(?:(?:sure|ok(?:ay)?|certainly)[!,.]?\s*)?"
    r"(?:(?:here\s+is|here's|this\s+is)\s+)?(?:the\s+|a\s+)?"
    r"(?:(?:standalone|stand-alone|rewritten|rephrased|reformulated|condensed|refined|new|updated|final)\s+)*"
    r"(?:follow[- ]up\s+)?(?:question|query|message)(?:\s+is)?[*_]*\s*[:：][*_]*",
    re.IGNORECASE,
)
_ZH_LABEL = re.compile(r"^[*_#\s]*[^\n:：?？。]{0,12}(?:问题|提问|查询)(?:是|为)?[*_]*\s*[:：][*_]*")
_PREAMBLE_LINE = re.compile(r"[:：]\s*$")
_EMPHASIS = re.compile(r"^(\*\*|__|\*|_)(.+)\1$", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*•>]+|\d+[.)])\s+")
_REFUSAL = re.compile(
    r"^(?:i'?m sorry|i am sorry|sorry|i cannot|i can't|i can not|i'm unable|i am unable|as an ai|"
    r"抱歉|对不起|很抱歉|我无法|我不能)",
    re.IGNORECASE,
)
_EN_INTERROGATIVES = frozenset(
    "what who whom whose which when where why how is are was were do does did can could should would will has have "
    "had may might must shall".split()
)
_EN_IMPERATIVES = frozenset(
    "tell list describe explain give name compare find show define summarize summarise please".split()
)
_ZH_INTERROGATIVES = ("吗", "什么", "哪", "谁", "怎么", "怎样", "如何", "为什么", "为何", "多少", "多高", "多大", "多长",
                      "多久", "多远", "几", "是否", "呢",
                      "是不是", "有没有")
_ZH_IMPERATIVES = ("请", "介绍", "说明", "解释", "列出", "比较", "告诉")
_SENTENCE_END = re.compile(r"[.!。！]\s*$|[.!。！]\s+\S")


class ParsedRewrite(NamedTuple):
    """The cleaned question (``None`` when rejected), the cleaning steps applied, and why it was rejected."""

    query: Optional[str]
    steps: Tuple[str, ...] = ()
    rejected: Optional[str] = None


def _asks(text: str, *, or_requests: bool = False) -> bool:
    """A question (question mark or interrogative word); with ``or_requests`` also a request ("Tell me ...")."""
    if text.rstrip().endswith(("?", "？")):
        return True
    if has_cjk(text):
        markers = _ZH_INTERROGATIVES + (_ZH_IMPERATIVES if or_requests else ())
        return any(m in text for m in markers)
    first = words(text.lower())[:1]
    asking = _EN_INTERROGATIVES | (_EN_IMPERATIVES if or_requests else frozenset())
    return bool(first) and first[0] in asking


def _is_question(text: str) -> bool:
    return _asks(text, or_requests=True)


def looks_like_answer(reply: str, question: str) -> bool:
    """The follow-up asks something and the reply is made of statements: sentences, none a question or request.
    Keyword-style rewrites ("Eiffel Tower height") are not statements."""
    return _asks(question) and not _is_question(reply) and _SENTENCE_END.search(reply) is not None


def _unwrap(text: str, steps: List[str]) -> str:
    """Strip labels, emphasis and quotes until nothing changes."""
    while True:
        before = text
        label = _LABEL.match(text) or _ZH_LABEL.match(text)
        if label is not None and text[label.end():].strip():
            text = text[label.end():].strip()
            steps.append("label")
        emphasis = _EMPHASIS.match(text)
        if emphasis is not None:
            text = emphasis.group(2).strip()
            steps.append("emphasis")
        if _quoted(text):
            text = text[1:-1].strip()
            steps.append("quotes")
        if text == before:
            return text


def _quoted(text: str) -> bool:
    """Whether ``text`` is wrapped in one pair of quotes: an opening and a closing quotation mark or bracket of
    Unicode (“…”, «…», 「…」), or the same straight quote, apostrophe or backtick at both ends."""
    if len(text) < 2:
        return False
    first, last = unicodedata.category(text[0]), unicodedata.category(text[-1])
    return (first in ("Pi", "Ps") and last in ("Pf", "Pe")) or (text[0] == text[-1] and text[0] in "\"'`")


def clean_rewrite(text: str) -> str:
    """The question in a rewrite reply, its wrapping removed ("" when nothing is left); see :func:`parse_rewrite`."""
    parsed = parse_rewrite(text)
    return parsed.query if parsed.query is not None else ""


def _norm(text: str) -> str:
    return " ".join(words(text.lower()))


def parse_rewrite(text: str, question: Optional[str] = None, earlier: Sequence[str] = ()) -> ParsedRewrite:
    """Clean ``text`` (a condense reply) into one question, or reject it. ``question`` is the user's follow-up: when
    it asks something and the reply is made of statements, the reply is an answer (:func:`looks_like_answer`).
    ``earlier`` are the user's earlier messages shown to the model: a reply repeating one is rejected."""
    steps: List[str] = []
    out = text.strip()
    fence = _FENCE.match(out)
    if fence is not None:
        out = fence.group(1).strip()
        steps.append("code fence")
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if not lines:
        return ParsedRewrite(None, tuple(steps), "empty output")
    if len(lines) > 1 and _PREAMBLE_LINE.search(lines[0]) and not _is_question(lines[0].rstrip(":： ")):
        lines = lines[1:]
        steps.append("preamble line")
    lines = [_BULLET.sub("", _unwrap(line, steps)) for line in lines]
    lines = [line for line in lines if line]
    if not lines:
        return ParsedRewrite(None, tuple(steps), "empty output")
    if len(lines) > 1:
        questions = [line for line in lines if _is_question(line)]
        steps.append(f"kept 1 of {len(lines)} lines")
        out = questions[0] if questions else lines[0]
    else:
        out = lines[0]
    out = _unwrap(out, steps)
    if _REFUSAL.match(out):
        return ParsedRewrite(None, tuple(steps), f"refusal: {out[:80]!r}")
    if len(out) > MAX_REWRITE_CHARS:
        return ParsedRewrite(None, tuple(steps), f"too long for a question ({len(out)} > {MAX_REWRITE_CHARS} chars)")
    if question is not None and looks_like_answer(out, question):
        return ParsedRewrite(None, tuple(steps), f"looks like an answer, not a question: {out[:80]!r}")
    same = _norm(out)
    if question is not None and same == _norm(question):
        steps.append("unchanged")
    elif any(same == _norm(e) for e in earlier):
        return ParsedRewrite(None, tuple(steps), f"repeats an earlier question: {out[:80]!r}")
    return ParsedRewrite(out, tuple(steps))
