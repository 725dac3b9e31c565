"""``TreeSearch``: judge-guided recursive retrieval.

For a question: retrieve (or take the given nodes), grade every new chunk (in parallel on the async path). If any
chunk scores 2, stop at this level. Otherwise each chunk scored 1 (highest-ranked first, up to ``max_branching``,
above ``max_depth``) issues its follow-up question, which is searched the same way; the sub-question's answer
(``answerer``, over its own kept chunks) is attached to that chunk. Chunks scored 0 are dropped. The result is the
question's kept chunks, those scored 1 enriched with their sub-answers, and the :class:`SearchTree` of everything.

The search is written once, as a generator that yields requests (retrieve, a batch of grades, answer) and receives
their results; a sync and an async driver execute it. A chunk already graded elsewhere in the tree is not graded
again (listed in ``seen``); a follow-up that repeats an ancestor question is a cycle and is not searched.
"""

from __future__ import annotations

import asyncio
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Generator, List, Optional, Sequence, Set, Tuple

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.response_synthesizers import BaseSynthesizer
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.judge.base import BaseJudge
from llama_index_convrag.judge.events import (
    JudgeChunkGradedEvent,
    JudgeSearchEndEvent,
    JudgeSubAnswerEvent,
    JudgeSubQuestionEvent,
)
from llama_index_convrag.judge.limits import SearchLimits
from llama_index_convrag.judge.tree import GradedChunk, SearchNode, SearchTree
from llama_index_convrag.judge.verdict import PARTIAL, Verdict
from llama_index_convrag.prompts.judge import ENRICHED_CHUNK_TMPL
from llama_index_convrag.synthesizers.packing import TiktokenTokenizer, Tokenizer

dispatcher = get_dispatcher(__name__)

__all__ = ["SearchCancelled", "SearchResult", "TreeSearch", "enrich", "normalize_question"]


class SearchCancelled(RuntimeError):
    """The search was cancelled (``cancel`` was set); ``tree`` is the partial tree, status ``cancelled``."""

    def __init__(self, tree: SearchTree) -> None:
        super().__init__(f"judge search cancelled after {tree.stats.llm_calls} LLM call(s)")
        self.tree = tree


@dataclass
class SearchResult:
    """``evidence``: the question's kept chunks in retrieval order, graded-1 chunks enriched with their sub-answers;
    ``sub_evidence``: kept chunks of the sub-questions (they reach the answer through the sub-answers)."""

    tree: SearchTree
    evidence: List[NodeWithScore]
    sub_evidence: List[NodeWithScore]


@dataclass(frozen=True)
class _Retrieve:
    query: str


@dataclass(frozen=True)
class _Grade:
    question: str
    chunk: str


@dataclass(frozen=True)
class _Answer:
    question: str
    nodes: List[NodeWithScore]


@dataclass
class _State:
    tree: SearchTree
    seen: Set[str] = field(default_factory=set)
    asked: Dict[str, str] = field(default_factory=dict)  # normalised question -> path of its node
    sub_evidence: List[NodeWithScore] = field(default_factory=list)


Steps = Generator[Any, Any, List[NodeWithScore]]


def normalize_question(text: str) -> str:
    """Case-folded, whitespace collapsed, trailing punctuation dropped: what makes two questions "the same"."""
    return re.sub(r"\s+", " ", text.casefold()).strip().rstrip("?？.。!！ ")


def enrich(nws: NodeWithScore, question: str, answer: str, template: str = ENRICHED_CHUNK_TMPL) -> NodeWithScore:
    """A copy of the chunk (same id, metadata and score) whose text carries the follow-up question and answer."""
    node = nws.node.model_copy()
    node.metadata = dict(nws.node.metadata)
    node.set_content(template.format(chunk=nws.node.get_content(), question=question, answer=answer))
    return NodeWithScore(node=node, score=nws.score)


def _answer_of(response: Any) -> Tuple[str, int, int]:
    """``(text, llm_calls, prompt_tokens)`` of a synthesizer's response (core synthesizers report no counts)."""
    metadata = getattr(response, "metadata", None) or {}
    text = getattr(response, "response", None)
    return ("" if text is None else str(text)), int(metadata.get("llm_calls", 1)), int(metadata.get("prompt_tokens", 0))


class TreeSearch:
    """Judge-guided recursive retrieval. ``__init__`` takes built parts; ``answerer`` answers sub-questions and must
    not stream."""

    def __init__(
        self,
        *,
        retriever: BaseRetriever,
        judge: BaseJudge,
        answerer: BaseSynthesizer,
        limits: Optional[SearchLimits] = None,
        tokenizer: Optional[Tokenizer] = None,
        enriched_template: str = ENRICHED_CHUNK_TMPL,
    ) -> None:
        if getattr(answerer, "_streaming", False):
            raise ConfigurationError("the answerer of sub-questions must not stream: build it with streaming=False")
        missing = sorted({"chunk", "question", "answer"} - set(re.findall(r"{(\w+)}", enriched_template)))
        if missing:
            raise ConfigurationError(f"enriched_template must use {{chunk}}, {{question}} and {{answer}}; missing {missing}")
        self._retriever = retriever
        self.judge = judge
        self._answerer = answerer
        self.limits = limits if limits is not None else SearchLimits()
        self._tokenizer: Tokenizer = tokenizer if tokenizer is not None else TiktokenTokenizer()
        self._template = enriched_template

    @property
    def retriever(self) -> BaseRetriever:
        return self._retriever

    # public ----------------------------------------------------------------------------------------------------
    def search(
        self,
        question: str,
        *,
        nodes: Optional[Sequence[NodeWithScore]] = None,
        message_id: Optional[str] = None,
        cancel: Optional[threading.Event] = None,
    ) -> SearchResult:
        """Search from ``question``; ``nodes`` are its already retrieved chunks (else the retriever is asked).
        Setting ``cancel`` stops before the next LLM call or retrieval and raises :class:`SearchCancelled`."""
        state = self._start(question, message_id)
        steps = self._steps(state, state.tree.root, None if nodes is None else list(nodes))
        try:
            request = next(steps)
            while True:
                request = steps.send(self._execute(request, state, cancel))
        except StopIteration as stop:
            return self._finish(state, stop.value)
        except BaseException as exc:
            self._abort(state, steps, exc)
            raise

    async def asearch(
        self,
        question: str,
        *,
        nodes: Optional[Sequence[NodeWithScore]] = None,
        message_id: Optional[str] = None,
        cancel: Optional[threading.Event] = None,
    ) -> SearchResult:
        """Async twin of :meth:`search`; the chunks of one question are graded concurrently. Cancelling the task
        also stops the search (the tree is marked ``cancelled`` and ``CancelledError`` propagates)."""
        state = self._start(question, message_id)
        steps = self._steps(state, state.tree.root, None if nodes is None else list(nodes))
        try:
            request = next(steps)
            while True:
                request = steps.send(await self._aexecute(request, state, cancel))
        except StopIteration as stop:
            return self._finish(state, stop.value)
        except BaseException as exc:
            self._abort(state, steps, exc)
            raise

    # drivers ---------------------------------------------------------------------------------------------------
    def _execute(self, request: Any, state: _State, cancel: Optional[threading.Event]) -> Any:
        if isinstance(request, list):
            verdicts = []
            for grade in request:
                _check(cancel, state)
                verdicts.append(self.judge.grade(grade.question, grade.chunk))
            return verdicts
        _check(cancel, state)
        if isinstance(request, _Retrieve):
            return self._retriever.retrieve(QueryBundle(request.query))
        return _answer_of(self._answerer.synthesize(request.question, request.nodes))

    async def _aexecute(self, request: Any, state: _State, cancel: Optional[threading.Event]) -> Any:
        _check(cancel, state)
        if isinstance(request, list):
            return list(await asyncio.gather(*(self.judge.agrade(g.question, g.chunk) for g in request)))
        if isinstance(request, _Retrieve):
            return await self._retriever.aretrieve(QueryBundle(request.query))
        return _answer_of(await self._answerer.asynthesize(request.question, request.nodes))

    def _start(self, question: str, message_id: Optional[str]) -> _State:
        if not isinstance(question, str) or not question.strip():
            raise ConfigurationError(f"question must be a non-empty string, got {question!r}")
        root = SearchNode(question=question, depth=0, path="0")
        state = _State(tree=SearchTree(root=root, limits=self.limits.to_dict(), message_id=message_id))
        state.asked[normalize_question(question)] = root.path
        return state

    def _finish(self, state: _State, evidence: List[NodeWithScore]) -> SearchResult:
        state.tree.status = "complete"
        self._end_event(state.tree)
        return SearchResult(tree=state.tree, evidence=evidence, sub_evidence=state.sub_evidence)

    def _abort(self, state: _State, steps: Steps, exc: BaseException) -> None:
        steps.close()
        tree = state.tree
        cancelled = isinstance(exc, (SearchCancelled, asyncio.CancelledError))
        tree.status = "cancelled" if cancelled else "error"
        tree.error = None if cancelled else f"{type(exc).__name__}: {exc}"
        for chunk in tree.chunks():
            if chunk.status == "pending":
                chunk.status, chunk.note = "ungraded", f"not graded: search {tree.status}"
        self._end_event(tree)

    def _end_event(self, tree: SearchTree) -> None:
        dispatcher.event(JudgeSearchEndEvent(message_id=tree.message_id, status=tree.status,
                                             stats=tree.stats.to_dict()))

    # the search, once ------------------------------------------------------------------------------------------
    def _steps(self, state: _State, node: SearchNode, nodes: Optional[List[NodeWithScore]]) -> Steps:
        stats = state.tree.stats
        if nodes is None:
            nodes = yield _Retrieve(node.question)
            stats.retrievals += 1
        fresh = self._take_fresh(state, node, list(nodes))
        yield from self._grade(state, node, fresh)
        kept: Dict[int, NodeWithScore] = {i: n for i, (c, n) in enumerate(zip(node.chunks, fresh)) if c.kept}
        if node.answered_here:
            for chunk in node.chunks:
                if chunk.grade == PARTIAL:
                    chunk.note = "not expanded: a chunk at this level answers the question"
            return [kept[i] for i in sorted(kept)]
        expanded = 0
        for i, chunk in enumerate(node.chunks):
            if chunk.grade != PARTIAL:
                continue
            why = self._why_not_expand(state, node, chunk, expanded)
            if why is not None:
                chunk.note = why
                continue
            expanded += 1
            answer = yield from self._expand(state, node, i, chunk)
            if answer is not None:
                kept[i] = enrich(fresh[i], str(chunk.follow_up), answer, self._template)
        return [kept[i] for i in sorted(kept)]

    def _take_fresh(self, state: _State, node: SearchNode, nodes: List[NodeWithScore]) -> List[NodeWithScore]:
        fresh = []
        for nws in nodes:
            node_id = nws.node.node_id
            if node_id in state.seen:
                node.seen.append(node_id)
            else:
                state.seen.add(node_id)
                fresh.append(nws)
        node.chunks = [GradedChunk.from_node(n) for n in fresh]
        return fresh

    def _grade(self, state: _State, node: SearchNode, fresh: List[NodeWithScore]) -> Generator[Any, Any, None]:
        stats, limits = state.tree.stats, self.limits
        budget = max(0, limits.max_llm_calls - stats.llm_calls)
        texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in fresh[:budget]]
        verdicts: List[Verdict] = (yield [_Grade(node.question, t) for t in texts]) if texts else []
        stats.judge_calls += len(texts)
        stats.judge_prompt_tokens += sum(len(self._tokenizer.encode(self.judge.prompt_text(node.question, t)))
                                         for t in texts)
        for index, (chunk, verdict) in enumerate(zip(node.chunks, verdicts)):
            chunk.apply(verdict)
            stats.malformed += verdict.error is not None
            dispatcher.event(JudgeChunkGradedEvent(
                message_id=state.tree.message_id, path=node.path, index=index, node_id=chunk.node_id,
                grade=verdict.grade, reason=verdict.reason, follow_up=verdict.follow_up, error=verdict.error))
        for chunk in node.chunks[len(texts):]:
            chunk.status, chunk.note = "ungraded", f"not graded: max_llm_calls {limits.max_llm_calls} reached"

    def _why_not_expand(self, state: _State, node: SearchNode, chunk: GradedChunk, expanded: int) -> Optional[str]:
        limits = self.limits
        if chunk.follow_up is None:
            return "not expanded: the judge wrote no follow-up question"
        earlier = state.asked.get(normalize_question(chunk.follow_up))
        if earlier is not None:
            is_ancestor = node.path == earlier or node.path.startswith(earlier + ".")
            return f"cycle: repeats the question at {earlier}" if is_ancestor \
                else f"not expanded: already asked at {earlier}"
        if node.depth >= limits.max_depth:
            return f"not expanded: max_depth {limits.max_depth} reached"
        if expanded >= limits.max_branching:
            return f"not expanded: max_branching {limits.max_branching} reached"
        if state.tree.stats.llm_calls >= limits.max_llm_calls:
            return f"not expanded: max_llm_calls {limits.max_llm_calls} reached"
        return None

    def _expand(self, state: _State, node: SearchNode, index: int, chunk: GradedChunk) -> Generator[
        Any, Any, Optional[str]
    ]:
        """Search the chunk's follow-up question; return its answer (None when nothing was found or no budget)."""
        stats, message_id = state.tree.stats, state.tree.message_id
        question = str(chunk.follow_up)
        child = SearchNode(question=question, depth=node.depth + 1, path=f"{node.path}.{index}")
        chunk.child = child
        state.asked[normalize_question(question)] = child.path
        stats.sub_questions += 1
        dispatcher.event(JudgeSubQuestionEvent(message_id=message_id, path=child.path, parent_path=node.path,
                                               node_id=chunk.node_id, question=question, depth=child.depth))
        child_evidence = yield from self._steps(state, child, None)
        if not child_evidence:
            chunk.note = "sub-question found no evidence"
            return None
        if stats.llm_calls >= self.limits.max_llm_calls:
            chunk.note = f"not answered: max_llm_calls {self.limits.max_llm_calls} reached"
            return None
        answer, calls, tokens = yield _Answer(question, child_evidence)
        stats.answer_calls += calls
        stats.answer_prompt_tokens += tokens
        child.answer = answer
        chunk.status = "enriched"
        state.sub_evidence.extend(child_evidence)
        dispatcher.event(JudgeSubAnswerEvent(message_id=message_id, path=child.path, node_id=chunk.node_id,
                                             question=question, answer=answer))
        return answer


def _check(cancel: Optional[threading.Event], state: _State) -> None:
    if cancel is not None and cancel.is_set():
        raise SearchCancelled(state.tree)
