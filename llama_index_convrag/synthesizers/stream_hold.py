"""One hold for a streamed answer: the one place that decides what text is held back, and why.

A streamed answer is shown as it comes, except where showing it now could show something wrong. :class:`StreamHold`
is fed the answer's deltas and returns what may be shown; :attr:`StreamHold.held_for` says why the rest waits:

* a **head rule** (:class:`HeadRule`) holds the answer's start while it could still turn out to be no answer; the
  chat engine adds one (``chat.fallback.AnswerRule``: only citation markers so far, or the question restated),
  and at the end of a stream still held there the rule's verdict says whether the held text is shown or replaced;
* :data:`SHORT`: with ``citation_mode="aligned"``, the start is held while the answer could still be a short one
  that is widened to its passage's expression (:func:`~.completion.could_be_short`, :func:`~.completion.complete_answer`);
* :data:`SENTENCE`: with ``citation_mode="aligned"``, what follows a sentence's last letter or digit (where its
  ``[n]`` goes) waits until the sentence is complete, then the sentence is cited (:func:`~.grounding.cite_judged`),
  and its grounding judgment is kept for the turn record (:attr:`StreamHold.judged`), so nothing is judged twice.

At the end (:meth:`StreamHold.end`) the citations of the shown text, a widening and the grounding are written to the
response's ``metadata``, as a whole (unstreamed) answer's are. Whoever iterates the answer drives the hold: the
synthesizer's own stream (:func:`held_stream`), or the chat engine's one turn pipeline, which reads the raw deltas
and this same hold (:class:`HeldStreamingResponse`), so a token passes one hold, once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator as AnyAsyncIterator
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, AsyncIterator, Dict, Generator, Iterator, List, Optional, Protocol, Sequence

from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.schema import NodeWithScore

from llama_index_convrag.synthesizers import citations as cite
from llama_index_convrag.synthesizers.completion import COMPLETION_KEY, Completion, complete_answer, could_be_short
from llama_index_convrag.synthesizers.grounding import (SentenceSupport, SupportScorer, _body_end, cite_judged,
                                                        grounding_of, passage_terms_of)
from llama_index_convrag.text import may_end_sentence, sentence_spans

SHORT, SENTENCE = "short", "sentence"
""":attr:`StreamHold.held_for` values of the hold's own reasons (a head rule names its own)."""
GROUNDING_KEY = "grounding"
"""``response.metadata`` key of an aligned answer's grounding (``grounding.grounding_of``), judged while citing."""


class HeadRule(Protocol):
    """A reason to hold a stream's start."""

    def holding(self, head: str) -> Optional[str]:
        """Why ``head`` (the stream's text so far) is held (a short reason), or None when this rule lets it go."""

    def verdict(self, text: str) -> Optional[str]:
        """At the end of a stream whose start was still held: why ``text`` must not be shown (None: show it)."""


@dataclass
class StreamHold:
    """Decides what of a streamed answer may be shown (see the module docstring). ``passages`` are the numbered
    passages (``[n]`` is passage n); ``align``: cite each sentence with its passage (and widen a short answer
    toward ``question``); ``nodes``: map the shown text's markers to them in ``metadata`` at the end (None: the answer
    is not cited); ``rules``: head rules (the chat engine's is added by :meth:`add_rule` before the first delta);
    ``scorer``: judges support instead of the lexical check (:data:`~.grounding.SupportScorer`)."""

    passages: Sequence[str] = ()
    question: Optional[str] = None
    align: bool = False
    nodes: Optional[Sequence[NodeWithScore]] = None
    metadata: Dict[str, Any] = field(default_factory=dict)
    rules: List[HeadRule] = field(default_factory=list)
    scorer: Optional[SupportScorer] = None
    #: why text is held right now (None: nothing is)
    held_for: Optional[str] = field(default=None, init=False)
    #: everything shown so far
    text: str = field(default="", init=False)
    #: at the end: why the held start is not shown (a head rule's verdict), and that text
    verdict: Optional[str] = field(default=None, init=False)
    held_text: str = field(default="", init=False)
    completion: Optional[Completion] = field(default=None, init=False)
    judged: List[SentenceSupport] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._head: Optional[str] = ""  # the start, while held (None once it flows)
        self._terms = passage_terms_of(self.passages) if self.align else []
        self._pending = ""  # aligned: the current sentence (and the start of the next)
        self._shown = 0  # characters of ``_pending`` already shown
        self._may_end = False  # ``_pending`` holds a character a sentence can end at
        self._sentences = 0  # sentences cited so far (the grounding judgments' indices)

    def add_rule(self, rule: HeadRule) -> None:
        """Hold the start for ``rule`` too (before the first delta)."""
        self.rules.append(rule)

    # --- the stream ------------------------------------------------------------------------------------------
    def feed(self, delta: str) -> str:
        """What may be shown after ``delta`` (possibly ``""``)."""
        if self._head is not None:
            head = self._head + delta
            reason = self._head_reason(head)
            if reason is not None:
                self._head, self.held_for = head, reason
                return ""
            self._head = None
            delta = head
        return self._show(self._flow(delta))

    def end(self) -> str:
        """The rest, at the end of the stream; ``""`` with :attr:`verdict` set when a head rule refuses the held
        start (the caller shows something else). Writes the metadata."""
        out = ""
        if self._head is not None:
            text, self._head = self._head, None
            if self.align and self.question is not None:
                text, self.completion = complete_answer(text, self.passages, self.question)
            self.verdict = next((v for v in (r.verdict(text) for r in self.rules) if v is not None), None)
            if self.verdict is not None:
                self.held_text, self.held_for = text, None
                return ""
            out = self._flow(text)
        out = self._show(out + self._flush())
        self._write_metadata()
        return out

    def abort(self) -> str:
        """The stream failed: what is held is shown as it is (a cut answer keeps its partial text), no verdict."""
        self.rules = []
        return self.end()

    # --- steps -----------------------------------------------------------------------------------------------
    def _head_reason(self, head: str) -> Optional[str]:
        for rule in self.rules:
            reason = rule.holding(head)
            if reason is not None:
                return reason
        if self.align and self.question is not None and could_be_short(head):
            return SHORT
        return None

    def _show(self, out: str) -> str:
        self.text += out
        return out

    def _flow(self, delta: str) -> str:
        """Aligned: cite each complete sentence, holding what follows the current one's last letter or digit."""
        if not self.align:
            self.held_for = None
            return delta
        self._pending += delta
        self._may_end = self._may_end or may_end_sentence(delta)
        out = ""
        spans = sentence_spans(self._pending) if self._may_end else ()  # the split only where a sentence can end
        if len(spans) >= 2:
            cut = spans[-2][1]
            out = self._cite(self._pending[:cut])[self._shown:]
            self._pending, self._shown = self._pending[cut:], 0
            self._may_end = may_end_sentence(self._pending)
        safe = _body_end(self._pending, self._shown)
        if safe > self._shown:
            out, self._shown = out + self._pending[self._shown:safe], safe
        self.held_for = SENTENCE if self._shown < len(self._pending) else None
        return out

    def _flush(self) -> str:
        rest, shown, self._pending, self._shown = self._pending, self._shown, "", 0
        self.held_for = None
        return self._cite(rest)[shown:] if self.align else rest

    def _cite(self, text: str) -> str:
        cited, judged, count = cite_judged(text, self.passages, self._terms, first=self._sentences,
                                            scorer=self.scorer)
        self.judged.extend(judged)
        self._sentences += count
        return cited

    def _write_metadata(self) -> None:
        if self.nodes is not None:
            self.metadata.update(cite.citation_metadata(self.text, self.nodes))
        if self.completion is not None:
            self.metadata[COMPLETION_KEY] = self.completion.to_dict()
        if self.align:
            self.metadata[GROUNDING_KEY] = grounding_of(self.judged, scorer=self.scorer)


def held_stream(deltas: Iterator[str], hold: StreamHold) -> Generator[str, None, None]:
    """``deltas`` through ``hold`` (empty pieces are not yielded); when ``deltas`` fail, what is held is passed on
    before the error is raised."""
    try:
        for delta in deltas:
            if out := hold.feed(delta):
                yield out
    except Exception:
        if tail := hold.abort():
            yield tail
        raise
    if tail := hold.end():
        yield tail


async def aheld_stream(deltas: AsyncIterator[str], hold: StreamHold) -> AsyncGenerator[str, None]:
    """Async twin of :func:`held_stream`."""
    try:
        async for delta in deltas:
            if out := hold.feed(delta):
                yield out
    except Exception:
        if tail := hold.abort():
            yield tail
        raise
    if tail := hold.end():
        yield tail


@dataclass
class HeldStreamingResponse(StreamingResponse):
    """A streamed answer whose text goes through :attr:`hold`: ``response_gen`` drives it; a reader that drives the
    hold itself (the chat engine) iterates :attr:`raw` instead, the answer's deltas before the hold."""

    raw: Optional[Iterator[str]] = None
    hold: StreamHold = field(default_factory=StreamHold)


@dataclass
class AsyncHeldStreamingResponse(AsyncStreamingResponse):
    """Async twin of :class:`HeldStreamingResponse`."""

    raw: Optional[AsyncIterator[str]] = None
    hold: StreamHold = field(default_factory=StreamHold)


def held_response(raw: Any, hold: StreamHold, sources: List[NodeWithScore]) -> Any:
    """A (sync or async) streaming response over ``raw`` through ``hold``; its metadata is the hold's."""
    if isinstance(raw, AnyAsyncIterator):
        return AsyncHeldStreamingResponse(aheld_stream(raw, hold), source_nodes=sources, metadata=hold.metadata,
                                          raw=raw, hold=hold)
    return HeldStreamingResponse(held_stream(raw, hold), source_nodes=sources, metadata=hold.metadata, raw=raw,
                                 hold=hold)


__all__ = ["AsyncHeldStreamingResponse", "GROUNDING_KEY", "HeadRule", "HeldStreamingResponse", "SENTENCE", "SHORT",
           "StreamHold", "aheld_stream", "held_response", "held_stream"]
