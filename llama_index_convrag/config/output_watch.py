"""How each LLM call of a step ended: the server's ``finish_reason`` and the output limit it ran under.

The chat engine opens :func:`watching` around the answer step; :class:`~.llm.OpenAICompatible` reports every call
that ends inside it (:func:`report_finish`; a streamed call reports to the watch that was open when the stream was
started, when it ends). :meth:`OutputWatch.problem` says why a finished answer must not be stored as complete: the
last call stopped at its output limit (``finish_reason == "length"``), or the model returned nothing.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ContextManager, Dict, List, Optional

from llama_index_convrag._scope import bound

#: ``finish_reason`` of a reply cut by the output limit (OpenAI, vLLM, llama.cpp).
LENGTH = "length"


class IncompleteAnswer(RuntimeError):
    """Why an answer is stored as ``error`` although nothing raised: the model's output limit, an empty reply, a
    stream that ended without a finish reason (never raised; the turn record names it)."""


@dataclass(frozen=True)
class Finish:
    """One finished call: the server's ``finish_reason`` (None when it sent none), the ``max_tokens`` sent, whether
    it was streamed and whether it produced nothing (no text, no tool call)."""

    reason: Optional[str]
    max_tokens: Optional[int]
    streamed: bool = False
    empty: bool = False

    def to_dict(self) -> Dict[str, Any]:
        return {"finish_reason": self.reason, "max_tokens": self.max_tokens, "streamed": self.streamed,
                "empty": self.empty}


class OutputWatch:
    """The finished calls of one step, in the order they ended (thread-safe: async grading runs in parallel)."""

    def __init__(self) -> None:
        self._calls: List[Finish] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> List[Finish]:
        with self._lock:
            return list(self._calls)

    def add(self, finish: Finish) -> None:
        with self._lock:
            self._calls.append(finish)

    def truncated(self) -> List[int]:
        """Indices of the calls that stopped at their output limit."""
        return [i for i, c in enumerate(self.calls) if c.reason == LENGTH]

    def problem(self, text: str) -> Optional[str]:
        """Why ``text`` (the step's final answer) is not a complete answer, or None. Only calls this watch saw
        count: with no reported call (another LLM class, no LLM call at all) there is nothing to say."""
        calls = self.calls
        if not calls:
            return None
        last = calls[-1]
        if last.reason == LENGTH:
            limit = "" if last.max_tokens is None else f" (max_tokens={last.max_tokens})"
            return (f"the model stopped at its output limit{limit}: the answer is cut off; raise --max-tokens / "
                    f"CONVRAG_LLM_MAX_TOKENS or ask for a shorter answer")
        if last.reason is None and last.streamed:
            return "the LLM server ended the stream without a finish reason: the answer may be cut off"
        if last.empty or not text.strip():
            return f"the model returned an empty answer (finish_reason {last.reason!r})"
        return None

    def earlier_truncations(self) -> List[str]:
        """Notes for intermediate calls (a refine step, a summary) that stopped at their output limit."""
        calls = self.calls
        return [f"LLM call {i + 1} of {len(calls)} stopped at its output limit (max_tokens={calls[i].max_tokens}); "
                f"the answer was built on its cut-off text" for i in self.truncated() if i < len(calls) - 1]


_WATCH: ContextVar[Optional[OutputWatch]] = ContextVar("convrag_output_watch", default=None)


def watching(watch: OutputWatch) -> ContextManager[OutputWatch]:
    """``watch`` collects every call that ends while the block runs (and streams started in it)."""
    return bound(_WATCH, watch)


def current_watch() -> Optional[OutputWatch]:
    """The watch open here, if any (a stream captures it when it starts)."""
    return _WATCH.get()


def report_finish(watch: Optional[OutputWatch], reason: Optional[str], max_tokens: Optional[int],
                  streamed: bool = False, empty: bool = False) -> None:
    """Record one finished call on ``watch`` (nothing when no watch is open)."""
    if watch is not None:
        watch.add(Finish(reason=reason, max_tokens=max_tokens, streamed=streamed, empty=empty))


def produced_nothing(response: Any) -> bool:
    """Whether a (final or accumulated streamed) ``ChatResponse`` holds neither text nor a tool call."""
    message = response.message
    return not (message.content or "").strip() and not message.additional_kwargs.get("tool_calls")


def finish_reason(raw: Any) -> Optional[str]:
    """``choices[0].finish_reason`` of an OpenAI response or stream chunk (object or dict), else None."""
    choices = raw.get("choices") if isinstance(raw, dict) else getattr(raw, "choices", None)
    if not choices:
        return None
    first = choices[0]
    reason = first.get("finish_reason") if isinstance(first, dict) else getattr(first, "finish_reason", None)
    return None if reason is None else str(reason)


__all__ = ["Finish", "IncompleteAnswer", "LENGTH", "OutputWatch", "current_watch", "finish_reason", "produced_nothing", "report_finish", "watching"]
