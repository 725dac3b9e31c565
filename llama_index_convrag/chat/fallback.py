"""What the engine shows when the LLM's answer is empty or only citation markers (``[1]``): never that.

:class:`AnswerFallback` recovers such an answer once, in order:

1. ``llm_retry_without_citations``: the same synthesizer without the citation instruction
   (:func:`~llama_index_convrag.synthesizers.uncited.without_citations`) answers again over the same passages; its
   sentences are then cited by aligning each with the passage that supports it
   (:func:`~llama_index_convrag.synthesizers.grounding.cite_sentences`);
2. ``extractive_fallback``: when there is nothing to retry (another kind of synthesizer, a query engine) or the retry
   is empty or markers only too, the extractive answer (the retrieved sentences closest to the question, cited).

The turn record's ``answer_source`` says which answer is shown (:data:`ANSWER_SOURCES`). A streamed answer is held
back while it is only markers and whitespace (:class:`MarkerHold`) and flows on at its first word; a stream that ends
with nothing else shows the recovered answer as its one delta, so nothing wrong was ever shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, List, Optional, Sequence

from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore

from llama_index_convrag.errors import ArgumentTypeError
from llama_index_convrag.prompts.synthesis import CITATION_EXAMPLE
from llama_index_convrag.synthesizers import BaseSynthesizer, Extractive
from llama_index_convrag.synthesizers.citations import ALIGNED, citation_metadata, has_answer_text, strip_markers
from llama_index_convrag.synthesizers.config import DEFAULT_EMPTY_RESPONSE
from llama_index_convrag.synthesizers.grounding import cite_sentences
from llama_index_convrag.synthesizers.registry import lookup_mode, registered_modes
from llama_index_convrag.synthesizers.uncited import without_citations

LLM, RETRY, EXTRACTIVE_FALLBACK, NO_LLM = "llm", "llm_retry_without_citations", "extractive_fallback", "no_llm"
ANSWER_SOURCES = (LLM, RETRY, EXTRACTIVE_FALLBACK, NO_LLM)
"""``TurnRecord.answer_source``: the LLM's answer; its retry without the citation instruction; the extractive answer
after an empty or marker-only one; an answer no LLM wrote (a mode without an LLM call, e.g. ``extractive``)."""
#: The citation prompt's example without its marker and full stop: a reply that only repeats it (with any marker)
#: is no answer.
EXAMPLE_WORDS = strip_markers(CITATION_EXAMPLE).rstrip(" .")


def writes_with_llm(synthesizer: Any, llm: Any) -> bool:
    """Whether the answer is the LLM's: an LLM is configured and the synthesizer is not one of the registered modes
    that make no LLM call (``extractive``, ``context_only``, ``no_text``; a query engine or the judge counts as
    the LLM's)."""
    if llm is None:
        return False
    mode = getattr(synthesizer, "mode", None)
    return mode not in registered_modes() or lookup_mode(mode).requires_llm


@dataclass(frozen=True)
class Recovered:
    """The answer shown instead of an empty or marker-only one: its text, a response carrying its citations
    (``metadata["citations"]``) and its :data:`ANSWER_SOURCES` value."""

    text: str
    response: Response
    source: str


def is_empty_answer(text: str) -> bool:
    """Blank, only citation markers, only the citation prompt's format example repeated, or the synthesizers' default
    ``empty_response`` (what a blank LLM reply over passages becomes)."""
    rest = " ".join(strip_markers(text).split()).replace(EXAMPLE_WORDS, "")
    return not has_answer_text(rest) or text.strip() == DEFAULT_EMPTY_RESPONSE


def passages_of(nodes: Sequence[NodeWithScore]) -> List[str]:
    """The text of each node (no metadata), as the answer is checked against."""
    return [n.node.get_content() for n in nodes]


def cited_retry(text: str, nodes: Sequence[NodeWithScore]) -> Optional[Recovered]:
    """A retry's uncited ``text`` with its sentences cited (pure); None when it is empty or markers only too."""
    if is_empty_answer(text):
        return None
    cited = cite_sentences(text, passages_of(nodes))
    metadata = {**citation_metadata(cited, nodes), "citation_mode": ALIGNED}
    return Recovered(cited, Response(cited, source_nodes=list(nodes), metadata=metadata), RETRY)


def extractive_result(response: Any) -> Recovered:
    text = str(response)
    return Recovered(text, response, EXTRACTIVE_FALLBACK)


class AnswerFallback:
    """Recovers an empty or marker-only answer (see the module docstring). ``retry=False`` goes straight to the
    extractive answer; ``extractive`` is the synthesizer of the last resort (default: :class:`Extractive` with the
    local embedding model, loaded on first use)."""

    def __init__(self, *, retry: bool = True, extractive: Optional[BaseSynthesizer] = None) -> None:
        if not isinstance(retry, bool):
            raise ArgumentTypeError(f"retry must be a bool, got {retry!r}")
        if extractive is not None and not isinstance(extractive, BaseSynthesizer):
            raise ArgumentTypeError(f"extractive must be a synthesizer (BaseSynthesizer), got {extractive!r}")
        self.retry = retry
        self._extractive = extractive

    @property
    def extractive(self) -> BaseSynthesizer:
        if self._extractive is None:
            self._extractive = Extractive()
        return self._extractive

    def _twin(self, synthesizer: Any) -> Optional[BaseSynthesizer]:
        return without_citations(synthesizer) if self.retry else None

    def recover(self, synthesizer: Any, query: str, nodes: Sequence[NodeWithScore]) -> Recovered:
        twin = self._twin(synthesizer)
        if twin is not None:
            found = cited_retry(str(twin.synthesize(query, list(nodes))), nodes)
            if found is not None:
                return found
        return extractive_result(self.extractive.synthesize(query, list(nodes)))

    async def arecover(self, synthesizer: Any, query: str, nodes: Sequence[NodeWithScore]) -> Recovered:
        """Async twin of :meth:`recover`."""
        twin = self._twin(synthesizer)
        if twin is not None:
            found = cited_retry(str(await twin.asynthesize(query, list(nodes))), nodes)
            if found is not None:
                return found
        return extractive_result(await self.extractive.asynthesize(query, list(nodes)))


class MarkerHold:
    """Holds a stream's first deltas back while together they are only markers and whitespace, or could still be
    the citation prompt's example repeated; passes everything through from the first delta that decides."""

    def __init__(self) -> None:
        self.head: Optional[str] = ""

    @property
    def holding(self) -> bool:
        """True until the head was decided (then the stream flows)."""
        return self.head is not None

    def feed(self, delta: str) -> str:
        if self.head is None:
            return delta
        head = self.head + delta
        if undecided(head):
            self.head = head
            return ""
        self.head = None
        return head

    def end(self) -> Optional[str]:
        """At the end of the stream: the held text when it is an answer, None when it is empty (recover)."""
        head, self.head = self.head, None
        return None if head is None or is_empty_answer(head) else head


def undecided(head: str) -> bool:
    """Whether a stream's first text is only markers so far, or could still be :data:`CITATION_EXAMPLE` repeated."""
    rest = " ".join(strip_markers(head).split()).strip("\"“” ")
    return not has_answer_text(head) or EXAMPLE_WORDS.startswith(rest) or is_empty_answer(rest)


def held_stream(deltas: Iterator[str], recover: Callable[[], str]) -> Iterator[str]:
    """``deltas`` through a :class:`MarkerHold`; when they end without an answer, ``recover()``'s text instead."""
    hold = MarkerHold()
    for delta in deltas:
        out = hold.feed(delta)
        if out:
            yield out
    if hold.holding:
        held = hold.end()
        yield held if held is not None else recover()


async def aheld_stream(deltas: AsyncIterator[str], recover: Callable[[], Awaitable[str]]) -> AsyncIterator[str]:
    """Async twin of :func:`held_stream`."""
    hold = MarkerHold()
    async for delta in deltas:
        out = hold.feed(delta)
        if out:
            yield out
    if hold.holding:
        held = hold.end()
        yield held if held is not None else await recover()


__all__ = ["ANSWER_SOURCES", "AnswerFallback", "MarkerHold", "Recovered", "aheld_stream", "cited_retry",
           "held_stream", "is_empty_answer", "passages_of", "undecided", "writes_with_llm"]
