"""The LLM as a reranker: listwise (one prompt per batch) or pointwise (one prompt per text).

Replies are parsed defensively. LlamaIndex's ``LLMRerank`` parser crashes on chit-chat and on unrelated lines with a
comma (run-llama/llama_index#11093, #17352), maps ``Doc: 0`` to the last node through negative indexing (#22743) and
shifts scores onto the wrong node when a relevance is unreadable (#22404). Here a line counts only when it starts
with ``Doc``/``Document`` and a number in ``1..n`` followed by a relevance or nothing but punctuation (so "Doc 2
does not help" is prose, not a pick); a repeated number keeps its first mention; an unreadable or out-of-scale
relevance inherits the one above it (the list is in relevance order); anything else is ignored. A reply made of
bare numbers only ("1", "2, 1, 3", "[2] [1]") is read as document numbers in order, and so is a line listing
only document references ("Document 1, Document 3"); Qwen2.5-0.5B behind llama.cpp replied with both.

Every prompt fits the LLM's window: the passages share what the window leaves after the output limit, the template
and the question (:func:`passage_budget`, the chat budget's 95% rule), each cut to its share (:func:`cut_passages`),
counted as the served model counts where its server has a token-count endpoint, else with tiktoken. When not even
:data:`MIN_PASSAGE_TOKENS` per passage fit, the scorer raises
:class:`ScorerError` naming the numbers (``ModelRerank`` then keeps the incoming order and says so).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType

from llama_index_convrag.config.llm import token_counter
from llama_index_convrag.config.tokens import count_tokens, cut_to_tokens
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.postprocessors.scorers.base import Scorer, ScorerError
from llama_index_convrag.prompts.rerank import LISTWISE_DOC_TMPL, LISTWISE_RERANK_PROMPT, POINTWISE_RERANK_PROMPT

logger = logging.getLogger(__name__)

MODES = ("listwise", "pointwise")
#: Listed order breaks ties between equal relevances without crossing to the next relevance step (n < 1000).
RANK_EPSILON = 1e-3

_PREFIX = re.compile(r"^\s*(?:[-*•>]+\s*|\d+\s*[.)]\s+)?[*_]*\s*")
_DOC = re.compile(r"^(?:doc(?:ument)?)\s*(?:number|no\.?|#)?\s*[:#]?\s*\[?\s*(-?\d+)\s*\]?", re.IGNORECASE)
_REL = re.compile(r"relevance(?:\s*score)?\W{0,4}?(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_WORDY = re.compile(r"[A-Za-z0-9]")
_NUMBER = re.compile(r"^\s*[*_]*\s*(-?\d+(?:\.\d+)?)\s*[*_.]*\s*$")
_LABELLED = re.compile(r"(?:relevance|score|rating)(?:\s*score)?\s*[*_]*\s*[:=]?\s*[*_]*\s*(-?\d+(?:\.\d+)?)", re.I)
_OUT_OF = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+)", re.IGNORECASE)
_LEADING = re.compile(r"^\s*[*_]*\s*(-?\d+(?:\.\d+)?)(?!\d|\.\d)")
_DOC_LIST = re.compile(r"^(?:doc(?:ument)?\s*#?\s*\d+\s*[,;]\s*(?:and\s+)?)+doc(?:ument)?\s*#?\s*\d+\W*$", re.I)
_BARE_NUMBERS = re.compile(r"^[\s\[\](),;>.#]*\d+(?:[\s\[\](),;>.#]+\d+)*[\s\[\](),;>.#]*$")
#: Share of ``context_window - reserved output`` a prompt may fill (the chat budget's ratio: tokenizers differ).
BUDGET_RATIO = 0.95
#: Output tokens reserved when the LLM states no output limit.
DEFAULT_RESERVED_OUTPUT = 256
#: Fewer tokens per passage than this and the ranking means nothing: the scorer refuses.
MIN_PASSAGE_TOKENS = 16


@dataclass(frozen=True)
class Choice:
    """One accepted line of a listwise reply: a 1-based document number and its relevance, if readable."""

    number: int
    relevance: Optional[float]


def passage_budget(context_window: int, reserved_output: int, overhead: int, count: int) -> int:
    """Tokens each of ``count`` passages may take: ``floor(0.95 * (window - reserved output)) - overhead`` shared
    equally; ScorerError naming the numbers when that is under :data:`MIN_PASSAGE_TOKENS`."""
    room = math.floor(BUDGET_RATIO * (context_window - reserved_output)) - overhead
    share = room // max(count, 1)
    if share < MIN_PASSAGE_TOKENS:
        raise ScorerError(f"the LLM rerank prompt does not fit the model's context window: {count} passage(s) "
                          f"share {room} tokens (floor({BUDGET_RATIO} x ({context_window} - {reserved_output} "
                          f"output)) - {overhead} for the prompt), under {MIN_PASSAGE_TOKENS} each; rerank fewer "
                          f"passages or use a model with a larger window")
    return share


def cut_passages(texts: Sequence[str], max_tokens: int) -> Tuple[List[str], int]:
    """Each text cut to its first ``max_tokens`` tokens, and how many were cut."""
    pairs = [cut_to_tokens(t, max_tokens) for t in texts]
    return [text for text, _ in pairs], sum(1 for _, cut in pairs if cut)


def parse_listwise(reply: str, num_docs: int, max_relevance: float) -> List[Choice]:
    """Accepted choices in reply order: in-range numbers only, first mention wins, chit-chat ignored."""
    seen = set()
    out: List[Choice] = []
    lines: List[str] = []
    for raw in reply.splitlines():
        line = _PREFIX.sub("", raw, count=1)
        lines += re.split(r"\s*[,;]\s*(?:and\s+)?", line) if _DOC_LIST.match(line) else [line]
    for line in lines:
        doc = _DOC.match(line)
        if doc is None:
            continue
        number = int(doc.group(1))
        rel = _REL.search(line, doc.end())
        rest = line[doc.end():]
        if rel is None and "relevan" not in rest.lower() and _WORDY.search(rest):
            continue  # prose about a document ("Doc 2 does not help"), not a listing
        if not 1 <= number <= num_docs or number in seen:
            continue
        seen.add(number)
        relevance = float(rel.group(1)) if rel is not None else None
        if relevance is not None and not 0 <= relevance <= max_relevance:
            relevance = None
        out.append(Choice(number, relevance))
    if not out and _BARE_NUMBERS.match(reply):
        for number in (int(n) for n in re.findall(r"\d+", reply)):
            if 1 <= number <= num_docs and number not in seen:
                seen.add(number)
                out.append(Choice(number, None))
    return out


def listwise_scores(choices: Sequence[Choice], num_docs: int, max_relevance: float) -> List[float]:
    """Per-document scores: the stated relevance (inherited from the line above when missing, the top of the
    scale for the first line) minus ``RANK_EPSILON`` per listed position; unlisted documents score 0."""
    scores = [0.0] * num_docs
    previous = float(max_relevance)
    for position, choice in enumerate(choices):
        relevance = previous if choice.relevance is None else choice.relevance
        previous = relevance
        scores[choice.number - 1] = relevance - RANK_EPSILON * position
    return scores


def parse_pointwise(reply: str, max_relevance: float) -> Optional[float]:
    """The rating in a pointwise reply, or None when no rating on the scale can be read without guessing."""
    text = reply.strip()
    candidates = []
    whole = _NUMBER.match(text)
    if whole is not None:
        candidates.append(whole.group(1))
    else:
        labelled = _LABELLED.search(text)
        out_of = _OUT_OF.search(text)
        if labelled is not None:
            candidates.append(labelled.group(1))
        elif out_of is not None and float(out_of.group(2)) == max_relevance:
            candidates.append(out_of.group(1))
        else:
            leading = _LEADING.match(text.splitlines()[0]) if text else None
            if leading is not None:
                candidates.append(leading.group(1))
    for value in candidates:
        number = float(value)
        if 0 <= number <= max_relevance:
            return number
    return None


class LLMScorer(PromptMixin, Scorer):
    """Scores with an LLM; ``mode`` is ``"listwise"`` (one call per batch) or ``"pointwise"`` (one per text)."""

    def __init__(
        self,
        llm: LLM,
        *,
        mode: str = "listwise",
        max_relevance: int = 10,
        listwise_prompt: Optional[BasePromptTemplate] = None,
        pointwise_prompt: Optional[BasePromptTemplate] = None,
        num_workers: int = 4,
    ) -> None:
        if mode not in MODES:
            raise ConfigurationError(f"mode must be one of {list(MODES)}, got {mode!r}")
        if max_relevance < 1:
            raise ConfigurationError(f"max_relevance must be >= 1, got {max_relevance!r}")
        if num_workers < 1:
            raise ConfigurationError(f"num_workers must be >= 1, got {num_workers!r}")
        self.llm = llm
        self.mode = mode
        self.max_relevance = max_relevance
        self.listwise_prompt = LISTWISE_RERANK_PROMPT if listwise_prompt is None else listwise_prompt
        self.pointwise_prompt = POINTWISE_RERANK_PROMPT if pointwise_prompt is None else pointwise_prompt
        self.num_workers = num_workers

    @property
    def name(self) -> str:
        return f"llm-{self.mode}:{self.llm.metadata.model_name}"

    # prompts ---------------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {"listwise_prompt": self.listwise_prompt, "pointwise_prompt": self.pointwise_prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "listwise_prompt" in prompts:
            self.listwise_prompt = prompts["listwise_prompt"]
        if "pointwise_prompt" in prompts:
            self.pointwise_prompt = prompts["pointwise_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    # pure helpers shared by the twins ----------------------------------------------------------------
    def _fit(self, prompt: BasePromptTemplate, kwargs: dict, texts: Sequence[str], per_doc: str) -> List[str]:
        """``texts`` cut so that ``prompt`` filled with ``kwargs`` and them fits the LLM's window, counted as the
        served model counts (``config.llm.token_counter``) where its server says, else with tiktoken."""
        meta = self.llm.metadata
        served = token_counter(self.llm)
        count = served if served is not None else count_tokens
        reserved = meta.num_output if meta.num_output > 0 else DEFAULT_RESERVED_OUTPUT
        overhead = count(prompt.format(llm=self.llm, **{**kwargs, "context_str": ""}))
        overhead += len(texts) * (count(per_doc) + 2)
        share = passage_budget(meta.context_window, reserved, overhead, len(texts))
        if served is not None:  # cut in tiktoken tokens: scale the share by how the two counts compare here
            joined = "\n\n".join(texts)
            share = max(1, math.floor(share * count_tokens(joined) / max(served(joined), 1)))
        fitted, cut = cut_passages(texts, share)
        if cut:
            logger.info("LLM rerank: %d of %d passages cut to fit the %d-token window", cut, len(texts),
                        meta.context_window)
        return fitted

    def _listwise_kwargs(self, query: str, texts: Sequence[str]) -> dict:
        kwargs = {"context_str": "", "query_str": query, "num_docs": len(texts), "max_relevance": self.max_relevance}
        header = LISTWISE_DOC_TMPL.format(number=len(texts), text="")
        fitted = self._fit(self.listwise_prompt, kwargs, texts, header)
        kwargs["context_str"] = "\n\n".join(LISTWISE_DOC_TMPL.format(number=i, text=t)
                                             for i, t in enumerate(fitted, start=1))
        return kwargs

    def _pointwise_kwargs(self, query: str, text: str) -> dict:
        kwargs = {"context_str": "", "query_str": query, "max_relevance": self.max_relevance}
        kwargs["context_str"] = self._fit(self.pointwise_prompt, kwargs, [text], "")[0]
        return kwargs

    def _listwise_result(self, reply: str, count: int) -> List[float]:
        choices = parse_listwise(reply, count, self.max_relevance)
        if not choices:
            raise ScorerError(f"LLM listwise reply named no document in 1..{count}: {reply[:200]!r}")
        return listwise_scores(choices, count, self.max_relevance)

    def _pointwise_result(self, replies: Sequence[str]) -> List[float]:
        ratings = [parse_pointwise(r, self.max_relevance) for r in replies]
        unread = [i for i, r in enumerate(ratings) if r is None]
        if len(unread) == len(replies):
            raise ScorerError(f"no LLM pointwise reply held a rating in 0..{self.max_relevance}: {replies[0][:200]!r}")
        if unread:
            logger.warning("LLM pointwise replies %s held no rating; scored 0", unread)
        return [0.0 if r is None else r for r in ratings]

    # scorer API ------------------------------------------------------------------------------------
    def score(self, query: str, texts: Sequence[str]) -> List[float]:
        if not texts:
            return []
        if self.mode == "listwise":
            reply = self.llm.predict(self.listwise_prompt, **self._listwise_kwargs(query, texts))
            return self._listwise_result(reply, len(texts))
        replies = [self.llm.predict(self.pointwise_prompt, **self._pointwise_kwargs(query, t)) for t in texts]
        return self._pointwise_result(replies)

    async def ascore(self, query: str, texts: Sequence[str]) -> List[float]:
        if not texts:
            return []
        if self.mode == "listwise":
            reply = await self.llm.apredict(self.listwise_prompt, **self._listwise_kwargs(query, texts))
            return self._listwise_result(reply, len(texts))
        gate = asyncio.Semaphore(self.num_workers)

        async def one(text: str) -> str:
            async with gate:
                return await self.llm.apredict(self.pointwise_prompt, **self._pointwise_kwargs(query, text))

        return self._pointwise_result(await asyncio.gather(*(one(t) for t in texts)))
