"""What the engine shows when the LLM's answer is empty, only citation markers (``[1]``) or only the question
restated: never that.

:class:`AnswerFallback` recovers an empty or marker-only answer once, in order:

1. ``llm_retry_without_citations``: the same synthesizer without the citation instruction
   (:func:`~llama_index_convrag.synthesizers.uncited.without_citations`) answers again over the same passages; its
   sentences are then cited by aligning each with the passage that supports it
   (:func:`~llama_index_convrag.synthesizers.grounding.cite_sentences`);
2. ``extractive_fallback``: when there is nothing to retry (another kind of synthesizer, a query engine) or the retry
   is empty or markers only too, the extractive answer (the retrieved sentences closest to the question, cited).

An answer that only restates the question (:func:`is_echo`: "2019-2020赛季欧冠冠军" asked, "2019-2020赛季欧冠冠军[1]"
answered, as a small model does with a keyword query) goes straight to the extractive answer: asking the same model
the same question again would restate it again. The turn record's ``warnings`` say so.

The turn record's ``answer_source`` says which answer is shown (:data:`ANSWER_SOURCES`). A streamed answer is held
back while it is only markers and whitespace, or could still be the question restated (no content word, number or
Chinese character the question lacks yet): :class:`AnswerRule` is that rule of the stream's one hold
(:class:`~llama_index_convrag.synthesizers.stream_hold.StreamHold`); the answer flows on from the first delta that
decides, and a stream that ends still held shows the recovered answer as its one delta, so nothing wrong was ever
shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, FrozenSet, List, Optional, Sequence, Tuple

from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore

from llama_index_convrag._words import CJK_RUN
from llama_index_convrag.errors import ArgumentTypeError
from llama_index_convrag.prompts.synthesis import CITATION_EXAMPLE
from llama_index_convrag.synthesizers import BaseSynthesizer, Extractive
from llama_index_convrag.synthesizers.citations import ALIGNED, citation_metadata, has_answer_text, strip_markers
from llama_index_convrag.synthesizers.config import DEFAULT_EMPTY_RESPONSE
from llama_index_convrag.synthesizers.grounding import cite_sentences
from llama_index_convrag.synthesizers.registry import lookup_mode, registered_modes
from llama_index_convrag.synthesizers.sentences import terms_of
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


EMPTY, ECHO = "empty", "echo"
"""Why an answer is recovered (:func:`no_answer`): empty or markers only; the question restated."""
ECHO_COVER = 0.5
"""An answer restates the question when it adds nothing to it and holds at least this share of its content."""
ECHO_WARNING = ("the model's answer only restated the question ({answer!r}); shown: the passages' sentences closest "
                "to the question")
#: A question answered by yes or no, whose answer may well restate it ("Is Paris the capital?" "Paris is the capital.")
_YES_NO = re.compile(r"^\s*(?:is|are|was|were|do|does|did|can|could|will|would|should|shall|may|might|must|has|have|"
                     r"had)\b|[吗么][？?]?\s*$|是否|是不是|有没有|能不能|可不可以", re.IGNORECASE)
_TRAILING_WORD = re.compile(r"[A-Za-z0-9]+$")


#: Chinese function characters, which add nothing to a question ("2018年俄罗斯世界杯的冠军" restates
#: "2018俄罗斯世界杯的冠军"): neither content nor length.
FUNCTION_CHARS = frozenset("的了是在年月日为和与及之")


def _content(text: str) -> Tuple[FrozenSet[str], FrozenSet[str]]:
    """Content words and numbers (stemmed, stop words dropped: ``sentences.terms_of``) and Chinese characters (less
    :data:`FUNCTION_CHARS`)."""
    words = frozenset(t for t in terms_of(text) if t.isascii())
    return words, frozenset(ch for run in CJK_RUN.findall(text) for ch in run if ch not in FUNCTION_CHARS)


def _length(text: str) -> int:
    return sum(ch not in FUNCTION_CHARS for ch in " ".join(strip_markers(text).split()))


@dataclass(frozen=True)
class _Question:
    """What an answer is compared with to tell whether it restates a question (computed once per question)."""

    words: FrozenSet[str]
    chars: FrozenSet[str]
    length: int
    yes_no: bool

    @classmethod
    def of(cls, question: str) -> "_Question":
        words, chars = _content(question)
        return cls(words, chars, _length(question), _YES_NO.search(question) is not None)

    def fits(self, text: str) -> bool:
        """``text`` may restate the question: not a yes/no question's answer, no longer than the question."""
        return not self.yes_no and _length(text) <= self.length

    def held(self, text: str) -> Optional[int]:
        """How many of the question's content words, numbers and Chinese characters ``text`` holds, when it adds
        none of its own; None when it adds some."""
        words, chars = _content(strip_markers(text))
        return len(words) + len(chars) if words <= self.words and chars <= self.chars else None


def is_echo(text: str, question: str) -> bool:
    """Whether ``text`` only restates ``question``: no longer than it, it adds no content word, number or Chinese
    character to it and holds at least :data:`ECHO_COVER` of the question's (a yes/no question's answer may restate
    it: never an echo)."""
    target = _Question.of(question)
    if not target.fits(text):
        return False
    held, total = target.held(text), len(target.words) + len(target.chars)
    return held is not None and total > 0 and held / total >= ECHO_COVER


def no_answer(text: str, question: Optional[str]) -> Optional[str]:
    """Why ``text`` is no answer to ``question``: :data:`EMPTY` (:func:`is_empty_answer`), :data:`ECHO`
    (:func:`is_echo`), or None (it is one)."""
    if is_empty_answer(text):
        return EMPTY
    if question is not None and is_echo(text, question):
        return ECHO
    return None


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
    """Recovers an empty or marker-only answer, or one that only restates the question (see the module docstring).
    ``retry=False`` goes straight to the extractive answer; ``echo=False`` shows an answer that restates the question
    as it is; ``extractive`` is the synthesizer of the last resort (default: :class:`Extractive` with the local
    embedding model, loaded on first use)."""

    def __init__(self, *, retry: bool = True, echo: bool = True, extractive: Optional[BaseSynthesizer] = None) -> None:
        if not isinstance(retry, bool):
            raise ArgumentTypeError(f"retry must be a bool, got {retry!r}")
        if not isinstance(echo, bool):
            raise ArgumentTypeError(f"echo must be a bool, got {echo!r}")
        if extractive is not None and not isinstance(extractive, BaseSynthesizer):
            raise ArgumentTypeError(f"extractive must be a synthesizer (BaseSynthesizer), got {extractive!r}")
        self.retry = retry
        self.echo = echo
        self._extractive = extractive

    @property
    def extractive(self) -> BaseSynthesizer:
        if self._extractive is None:
            self._extractive = Extractive()
        return self._extractive

    def judged_question(self, query: str) -> Optional[str]:
        """The question an answer is checked against for an echo (None: not checked, ``echo=False``)."""
        return query if self.echo else None

    def _twin(self, synthesizer: Any) -> Optional[BaseSynthesizer]:
        return without_citations(synthesizer) if self.retry else None

    def recover(self, synthesizer: Any, query: str, nodes: Sequence[NodeWithScore], reason: str = EMPTY) -> Recovered:
        """The answer shown instead of one that is no answer for ``reason`` (:func:`no_answer`)."""
        twin = self._twin(synthesizer) if reason == EMPTY else None
        if twin is not None:
            found = cited_retry(str(twin.synthesize(query, list(nodes))), nodes)
            if found is not None:
                return found
        return extractive_result(self.extractive.synthesize(query, list(nodes)))

    async def arecover(self, synthesizer: Any, query: str, nodes: Sequence[NodeWithScore],
                       reason: str = EMPTY) -> Recovered:
        """Async twin of :meth:`recover`."""
        twin = self._twin(synthesizer) if reason == EMPTY else None
        if twin is not None:
            found = cited_retry(str(await twin.asynthesize(query, list(nodes))), nodes)
            if found is not None:
                return found
        return extractive_result(await self.extractive.asynthesize(query, list(nodes)))


class AnswerRule:
    """The stream hold's rule for an LLM answer (a :class:`~llama_index_convrag.synthesizers.stream_hold.HeadRule`):
    holds the start while together it is only markers and whitespace or could still be the citation prompt's example
    repeated (:data:`EMPTY`), or could still be ``question`` restated (:data:`ECHO`, :func:`is_echo`: no longer than
    it, adding no content word, number or Chinese character to it; a word the next delta may continue is not judged
    yet). At the end, :func:`no_answer` is its verdict on a start still held."""

    def __init__(self, question: Optional[str] = None) -> None:
        self.question = question
        self._target = None if question is None else _Question.of(question)  # once, not per delta

    def holding(self, head: str) -> Optional[str]:
        if undecided(head):
            return EMPTY
        target = self._target
        if target is not None and target.fits(head) and target.held(_TRAILING_WORD.sub("", head)) is not None:
            return ECHO
        return None

    def verdict(self, text: str) -> Optional[str]:
        return no_answer(text, self.question)


def undecided(head: str) -> bool:
    """Whether a stream's first text is only markers so far, or could still be :data:`CITATION_EXAMPLE` repeated."""
    rest = " ".join(strip_markers(head).split()).strip("\"“” ")
    return not has_answer_text(head) or EXAMPLE_WORDS.startswith(rest) or is_empty_answer(rest)


__all__ = ["ANSWER_SOURCES", "ECHO", "ECHO_COVER", "EMPTY", "AnswerFallback", "AnswerRule", "Recovered",
           "cited_retry", "is_echo", "is_empty_answer", "no_answer", "passages_of", "undecided", "writes_with_llm"]
