"""A judge's grade of one chunk, and pure parsing of the judge's reply (tool-call arguments or free text).

Grades: 2 = the chunk answers the question, 1 = relevant but incomplete (with the follow-up question that would fill
the gap), 0 = irrelevant. A reply that cannot be read, or whose grade is not 0, 1 or 2, becomes grade 0 with
``error`` saying why: parsing never raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Dict, Mapping, Optional

from llama_index.core.bridge.pydantic import BaseModel, Field

GRADES = (0, 1, 2)
ANSWERS, PARTIAL, IRRELEVANT = 2, 1, 0
_PREVIEW = 200
_GRADE_RE = re.compile(r"\bgrade\W{0,5}(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_FOLLOW_UP_RE = re.compile(r"follow[-_ ]?up(?:[-_ ]question)?\W{0,5}(.+)", re.IGNORECASE)
_REASON_RE = re.compile(r"\breason\W{0,5}(.+)", re.IGNORECASE)

__all__ = ["ANSWERS", "GRADES", "IRRELEVANT", "JudgeReply", "PARTIAL", "Verdict", "verdict_from_args",
           "verdict_from_text"]


class JudgeReply(BaseModel):
    """Grade one retrieved passage against the question."""

    grade: int = Field(description="2: the passage answers the question; 1: relevant but incomplete; 0: irrelevant")
    reason: str = Field(default="", description="One sentence saying why.")
    follow_up: str = Field(
        default="", description="When the grade is 1: the follow-up question whose answer would fill the gap."
    )


@dataclass(frozen=True)
class Verdict:
    """One grade. ``error`` is set (and ``grade`` is 0) when the judge's reply was malformed or out of range."""

    grade: int
    reason: str = ""
    follow_up: Optional[str] = None
    error: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def malformed(cls, error: str) -> "Verdict":
        return cls(grade=IRRELEVANT, reason="malformed judge reply", error=error)


def _as_grade(value: Any) -> Optional[int]:
    """An integral grade from an int, an integral float or a numeric string; None otherwise (bools too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _call_arguments(args: Mapping[str, Any]) -> Any:
    """The arguments of a tool call written out as an object, ``{"name": ..., "arguments": {...} or "<json>"}`` (how
    a model that ignored the tools API writes one in prose); ``args`` itself otherwise."""
    if "grade" in args or set(args) - {"name", "arguments"} or "arguments" not in args:
        return args
    inner = args["arguments"]
    if isinstance(inner, str):
        try:
            inner = json.loads(inner)
        except json.JSONDecodeError:
            return args
    return inner if isinstance(inner, Mapping) else args


def verdict_from_args(args: Any) -> Verdict:
    """A verdict from tool-call arguments ``{"grade", "reason", "follow_up"}`` (also when wrapped as a whole call,
    ``{"name", "arguments"}``); malformed -> grade 0 + error."""
    if isinstance(args, Mapping):
        args = _call_arguments(args)
    if not isinstance(args, Mapping):
        return Verdict.malformed(f"expected an object with 'grade', got {type(args).__name__}: {_short(args)}")
    if "grade" not in args:
        return Verdict.malformed(f"reply has no 'grade': {_short(args)}")
    grade = _as_grade(args["grade"])
    if grade is None:
        return Verdict.malformed(f"grade {args['grade']!r} is not an integer; accepted: {list(GRADES)}")
    if grade not in GRADES:
        return Verdict.malformed(f"grade {grade} is out of range; accepted: {list(GRADES)}")
    follow_up = _text(args.get("follow_up", args.get("follow_up_question")))
    return Verdict(
        grade=grade,
        reason=_text(args.get("reason")),
        follow_up=follow_up if grade == PARTIAL and follow_up else None,
    )


def verdict_from_text(text: str) -> Verdict:
    """A verdict from a text reply: the first JSON object in it, else ``grade: N`` / ``follow-up: ...`` lines."""
    if not isinstance(text, str) or not text.strip():
        return Verdict.malformed("empty reply")
    obj = _first_json_object(text)
    if obj is not None:
        return verdict_from_args(obj)
    match = _GRADE_RE.search(text)
    if match is None:
        return Verdict.malformed(f"no grade found in reply: {_short(text)}")
    args: Dict[str, Any] = {"grade": match.group(1)}
    for key, pattern in (("follow_up", _FOLLOW_UP_RE), ("reason", _REASON_RE)):
        found = pattern.search(text)
        if found is not None:
            args[key] = found.group(1).splitlines()[0].strip().strip('"')
    return verdict_from_args(args)


def _first_json_object(text: str) -> Optional[Dict[str, Any]]:
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:_PREVIEW] + ("..." if len(text) > _PREVIEW else ""))
