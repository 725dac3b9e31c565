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
back while it is only markers and whitespace, or could still be the question restated (no content term the question
lacks yet): :class:`AnswerRule` is that rule of the stream's one hold
(:class:`~llama_index_convrag.synthesizers.stream_hold.StreamHold`); the answer flows on from the first delta that
decides, and a stream that ends still held shows the recovered answer as its one delta, so nothing wrong was ever
shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, FrozenSet, List, Optional, Sequence, Tuple

from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.prompts.synthesis import CITATION_EXAMPLE
from llama_index_convrag.synthesizers import BaseSynthesizer, Extractive
from llama_index_convrag.synthesizers.citations import ALIGNED, citation_metadata, has_answer_text, strip_markers
from llama_index_convrag.synthesizers.config import DEFAULT_EMPTY_RESPONSE
from llama_index_convrag.synthesizers.grounding import SupportScorer, cite_sentences
from llama_index_convrag.synthesizers.registry import lookup_mode, registered_modes
from llama_index_convrag.synthesizers.uncited import without_citations
from llama_index_convrag.text import HAN, holds_phrase, is_cjk, terms

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


@dataclass(frozen=True)
class EchoRules:
    """When an answer only restates its question (:func:`is_echo`), each rule with the measurement that chose it."""

    cover: float = 0.75
    """An answer restates the question when it adds no content term to it and holds at least this share of its
    terms: a near-verbatim restatement. ``bench/real_answers_replaced.py --echo-rules``: 0 of 3,418 human answers
    replaced at 0.75 and at 0.5 (both halves of each set); every echo the real models gave in
    ``bench/real_answers.py`` holds all of its question's terms, so the share only has to stay well above what a
    real answer restates."""
    yes_no: Tuple[str, ...] = ("^is", "^are", "^was", "^were", "^do", "^does", "^did", "^can", "^could", "^will",
                               "^would", "^should", "^shall", "^may", "^might", "^must", "^has", "^have", "^had",
                               "吗$", "是否", "是不是", "有没有", "能不能", "可不可以")
    """Cues of a question answered by yes or no, whose answer may well restate it ("Is Paris the capital?" "Paris
    is the capital."): never an echo (``bench/real_answers_replaced.py --echo-rules``: without them, the human
    answers replaced)."""

    def __post_init__(self) -> None:
        if isinstance(self.cover, bool) or not isinstance(self.cover, (int, float)) or not 0 < self.cover <= 1:
            raise ConfigurationError(f"cover must be a number in (0, 1], got {self.cover!r}")
        if isinstance(self.yes_no, str) or not all(isinstance(c, str) for c in self.yes_no):
            raise ConfigurationError(f"yes_no must be a tuple of cue phrases, got {self.yes_no!r}")


DEFAULT_ECHO_RULES = EchoRules()
ECHO_WARNING = ("the model's answer only restated the question ({answer!r}); shown: the passages' sentences closest "
                "to the question")


def _without_trailing_word(text: str) -> str:
    """``text`` less a word at its end the next delta may continue (a CJK run is not one: its words are cut by the
    dictionary, not by spaces)."""
    end = len(text)
    while end and (text[end - 1].isalnum() or text[end - 1] == "_") and not is_cjk(text[end - 1]):
        end -= 1
    return text[:end]


def _content(text: str) -> FrozenSet[str]:
    """Content terms (:func:`llama_index_convrag.text.terms`: stems less stop words, jieba's words for Chinese)."""
    return frozenset(terms(strip_markers(text)))


def _kept(found: FrozenSet[str]) -> set:
    """``found`` less one-character Chinese words ("年" in "2018年": a unit, no content of its own)."""
    return {t for t in found if len(t) > 1 or not HAN.match(t)}


@dataclass(frozen=True)
class _Question:
    """What an answer is compared with to tell whether it restates a question (computed once per question)."""

    terms: FrozenSet[str]
    yes_no: bool

    @classmethod
    def of(cls, question: str, rules: EchoRules = DEFAULT_ECHO_RULES) -> "_Question":
        return cls(frozenset(_kept(_content(question))), any(holds_phrase(question, c) for c in rules.yes_no))

    def held(self, text: str) -> Optional[int]:
        """How many of the question's content terms ``text`` holds, when it adds none of its own (a Chinese term
        also when it is written inside one of the question's); None when it adds some."""
        own = _kept(_content(text))
        if all(t in self.terms or any(t in q for q in self.terms) for t in own):
            return len(own & self.terms) + sum(1 for t in own - self.terms if any(t in q for q in self.terms))
        return None


def is_echo(text: str, question: str, rules: EchoRules = DEFAULT_ECHO_RULES) -> bool:
    """Whether ``text`` only restates ``question``: it adds no content term to it and holds at least ``rules.cover``
    of the question's (a yes/no question's answer may restate it: never an echo)."""
    target = _Question.of(question, rules)
    if target.yes_no or not target.terms:
        return False
    held = target.held(text)
    return held is not None and held / len(target.terms) >= rules.cover


def no_answer(text: str, question: Optional[str], rules: EchoRules = DEFAULT_ECHO_RULES) -> Optional[str]:
    """Why ``text`` is no answer to ``question``: :data:`EMPTY` (:func:`is_empty_answer`), :data:`ECHO`
    (:func:`is_echo` under ``rules``), or None (it is one)."""
    if is_empty_answer(text):
        return EMPTY
    if question is not None and is_echo(text, question, rules):
        return ECHO
    return None


def passages_of(nodes: Sequence[NodeWithScore]) -> List[str]:
    """The text of each node (no metadata), as the answer is checked against."""
    return [n.node.get_content() for n in nodes]


def cites(synthesizer: Any) -> bool:
    """Whether answers of ``synthesizer`` carry markers: ours say so (``citation_mode`` None: ``citations=False``);
    another synthesizer or a query engine is taken to cite."""
    return getattr(synthesizer, "citation_mode", ALIGNED) is not None


def cited_retry(text: str, nodes: Sequence[NodeWithScore], cite: bool = True,
                scorer: Optional[SupportScorer] = None) -> Optional[Recovered]:
    """A retry's uncited ``text`` with its sentences cited (pure; ``scorer`` judging support when given; left
    uncited when not ``cite``); None when it is empty or markers only too."""
    if is_empty_answer(text):
        return None
    cited = cite_sentences(text, passages_of(nodes), scorer) if cite else text
    metadata = {**citation_metadata(cited, nodes), "citation_mode": ALIGNED if cite else None}
    return Recovered(cited, Response(cited, source_nodes=list(nodes), metadata=metadata), RETRY)


def extractive_result(response: Any, cite: bool = True) -> Recovered:
    """The extractive answer as shown: with its markers, or without them when not ``cite`` (``citations=False``)."""
    if cite:
        return Recovered(str(response), response, EXTRACTIVE_FALLBACK)
    text = " ".join(strip_markers(str(response)).split())
    metadata = {**(getattr(response, "metadata", None) or {}), "citations": [], "invalid_citation_markers": []}
    return Recovered(text, Response(text, source_nodes=list(getattr(response, "source_nodes", [])), metadata=metadata),
                     EXTRACTIVE_FALLBACK)


class AnswerFallback:
    """Recovers an empty or marker-only answer, or one that only restates the question (see the module docstring).
    ``retry=False`` goes straight to the extractive answer; ``echo=False`` shows an answer that restates the question
    as it is; ``extractive`` is the synthesizer of the last resort (default: :class:`Extractive` with the local
    embedding model, loaded on first use); ``scorer`` judges which passage supports a retry's sentence (default: the
    lexical check, :mod:`~llama_index_convrag.synthesizers.grounding`); ``echo_rules`` tell an echo."""

    def __init__(self, *, retry: bool = True, echo: bool = True, extractive: Optional[BaseSynthesizer] = None,
                 scorer: Optional[SupportScorer] = None, echo_rules: EchoRules = DEFAULT_ECHO_RULES) -> None:
        if not isinstance(retry, bool):
            raise ArgumentTypeError(f"retry must be a bool, got {retry!r}")
        if not isinstance(echo, bool):
            raise ArgumentTypeError(f"echo must be a bool, got {echo!r}")
        if extractive is not None and not isinstance(extractive, BaseSynthesizer):
            raise ArgumentTypeError(f"extractive must be a synthesizer (BaseSynthesizer), got {extractive!r}")
        if scorer is not None and not callable(scorer):
            raise ArgumentTypeError(f"scorer must be a callable (claim, passages) -> scores or None, got {scorer!r}")
        if not isinstance(echo_rules, EchoRules):
            raise ArgumentTypeError(f"echo_rules must be an EchoRules, got {type(echo_rules).__name__}")
        self.retry = retry
        self.echo = echo
        self.scorer = scorer
        self.echo_rules = echo_rules
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

    def recover(self, synthesizer: Any, query: str, nodes: Sequence[NodeWithScore], reason: str = EMPTY,
                question: Optional[str] = None) -> Recovered:
        """The answer shown instead of one that is no answer for ``reason`` (:func:`no_answer`): the retry answers
        ``query`` (the prompt's, memory included), the extractive answer ``question`` (default: ``query``)."""
        twin = self._twin(synthesizer) if reason == EMPTY else None
        if twin is not None:
            found = cited_retry(str(twin.synthesize(query, list(nodes))), nodes, cites(synthesizer), self.scorer)
            if found is not None:
                return found
        return extractive_result(self.extractive.synthesize(question if question is not None else query, list(nodes)),
                                 cites(synthesizer))

    async def arecover(self, synthesizer: Any, query: str, nodes: Sequence[NodeWithScore],
                       reason: str = EMPTY, question: Optional[str] = None) -> Recovered:
        """Async twin of :meth:`recover`."""
        twin = self._twin(synthesizer) if reason == EMPTY else None
        if twin is not None:
            found = cited_retry(str(await twin.asynthesize(query, list(nodes))), nodes, cites(synthesizer),
                                self.scorer)
            if found is not None:
                return found
        return extractive_result(await self.extractive.asynthesize(question if question is not None else query,
                                                                   list(nodes)), cites(synthesizer))


class AnswerRule:
    """The stream hold's rule for an LLM answer (a :class:`~llama_index_convrag.synthesizers.stream_hold.HeadRule`):
    holds the start while together it is only markers and whitespace or could still be the citation prompt's example
    repeated (:data:`EMPTY`), or could still be ``question`` restated (:data:`ECHO`, :func:`is_echo` under ``rules``:
    adding no content term to it; a word the next delta may continue is not judged yet). At the end,
    :func:`no_answer` is its verdict on a start still held."""

    def __init__(self, question: Optional[str] = None, rules: EchoRules = DEFAULT_ECHO_RULES) -> None:
        self.question = question
        self.rules = rules
        self._target = None if question is None else _Question.of(question, rules)  # once, not per delta

    def holding(self, head: str) -> Optional[str]:
        if undecided(head):
            return EMPTY
        target = self._target
        if target is not None and not target.yes_no and target.held(_without_trailing_word(head)) is not None:
            return ECHO
        return None

    def verdict(self, text: str) -> Optional[str]:
        return no_answer(text, self.question, self.rules)


def undecided(head: str) -> bool:
    """Whether a stream's first text is only markers so far, or could still be :data:`CITATION_EXAMPLE` repeated."""
    rest = " ".join(strip_markers(head).split()).strip("\"“” ")
    return not has_answer_text(head) or EXAMPLE_WORDS.startswith(rest) or is_empty_answer(rest)


__all__ = ["ANSWER_SOURCES", "AnswerFallback", "AnswerRule", "DEFAULT_ECHO_RULES", "ECHO", "EMPTY", "EchoRules",
           "Recovered", "cited_retry", "cites", "is_echo", "is_empty_answer", "no_answer", "passages_of", "undecided",
           "writes_with_llm"]
