"""``JudgeSynthesizer``: grade the retrieved chunks, recurse on the gaps (:class:`TreeSearch`), then let the wrapped
synthesizer answer from the kept, enriched chunks.

It is a drop-in ``BaseSynthesizer``: give it to ``RetrieverQueryEngine`` or the chat engine and every answer is judged.
Response ``metadata`` keeps the wrapped synthesizer's entries and adds ``judge_tree`` (the :class:`SearchTree`, final
answer set when not streaming) and ``judge_stats`` (its stats as a dict). Chunks of sub-questions are added to
``source_nodes`` after the numbered ones (citations number only the chunks synthesis saw directly).

Events are tagged with the message id set by :func:`message_scope` (the chat engine sets the turn's assistant id).

When the judge keeps no chunk the wrapped synthesizer is not called: the answer says so, with the grades
(:func:`no_evidence_reply`), instead of the synthesizer's empty response.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, ContextManager, List, Optional, Sequence

from llama_index.core.base.response.schema import RESPONSE_TYPE, Response
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts.mixin import PromptMixinType
from llama_index.core.response_synthesizers import BaseSynthesizer as CoreBaseSynthesizer
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, QueryType, TextNode
from llama_index.core.types import RESPONSE_TEXT_TYPE

from llama_index_convrag._scope import bound
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.judge.search import SearchResult, TreeSearch
from llama_index_convrag.judge.tree import SearchTree
from llama_index_convrag.synthesizers.base import BaseSynthesizer

dispatcher = get_dispatcher(__name__)

_MESSAGE_ID: ContextVar[Optional[str]] = ContextVar("convrag_judge_message_id", default=None)

__all__ = ["JudgeSynthesizer", "current_message_id", "message_scope", "no_evidence_reply"]


def no_evidence_reply(tree: SearchTree) -> str:
    """What a judged turn answers when no chunk was kept: how many were graded what, and unreadable replies."""
    chunks = list(tree.root.chunks)
    graded = [c for c in chunks if c.grade is not None]
    unreadable = sum(1 for c in graded if c.error is not None)
    zeros = sum(1 for c in graded if c.grade == 0)
    parts = [f"the judge found no relevant passage: it graded {zeros} of {len(chunks)} passage(s) 0 (not relevant)"]
    if unreadable:
        parts.append(f"{unreadable} of its replies could not be read (graded 0); a larger judge model may help")
    ungraded = len(chunks) - len(graded)
    if ungraded:
        parts.append(f"{ungraded} passage(s) were not graded")
    return "; ".join(parts) + "; nothing to answer from"


def message_scope(message_id: Optional[str]) -> ContextManager[Optional[str]]:
    """Tag judge events (and the tree) raised inside the block with ``message_id``."""
    return bound(_MESSAGE_ID, message_id)


def current_message_id() -> Optional[str]:
    return _MESSAGE_ID.get()


class JudgeSynthesizer(BaseSynthesizer):
    """Judge-guided synthesis: ``search`` (a :class:`TreeSearch`) then ``synthesizer`` on its evidence."""

    mode = "judge"
    requires_llm = False

    def __init__(self, *, search: TreeSearch, synthesizer: CoreBaseSynthesizer) -> None:
        if isinstance(synthesizer, JudgeSynthesizer):
            raise ConfigurationError("JudgeSynthesizer cannot wrap another JudgeSynthesizer")
        super().__init__(None, callback_manager=synthesizer.callback_manager,
                         streaming=bool(getattr(synthesizer, "_streaming", False)))
        self._search = search
        self._synthesizer = synthesizer

    @property
    def search(self) -> TreeSearch:
        return self._search

    @property
    def synthesizer(self) -> CoreBaseSynthesizer:
        return self._synthesizer

    def _get_prompt_modules(self) -> PromptMixinType:
        return {"judge": self._search.judge, "synthesizer": self._synthesizer}

    # text-only interface: the tree is not returned ------------------------------------------------------------
    def get_response(self, query_str: str, text_chunks: Sequence[str], **extra_vars: Any) -> RESPONSE_TEXT_TYPE:
        result = self._search.search(query_str, nodes=_text_nodes(text_chunks), message_id=current_message_id())
        return self._synthesizer.get_response(query_str, _texts(result.evidence), **extra_vars)

    async def aget_response(self, query_str: str, text_chunks: Sequence[str], **extra_vars: Any) -> RESPONSE_TEXT_TYPE:
        result = await self._search.asearch(query_str, nodes=_text_nodes(text_chunks),
                                            message_id=current_message_id())
        return await self._synthesizer.aget_response(query_str, _texts(result.evidence), **extra_vars)

    # nodes: the tree on the response ---------------------------------------------------------------------------
    @dispatcher.span
    def synthesize(
        self,
        query: QueryType,
        nodes: List[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **extra_vars: Any,
    ) -> RESPONSE_TYPE:
        bundle = _bundle(query)
        result = self._search.search(bundle.query_str, nodes=nodes, message_id=current_message_id())
        if not result.evidence and nodes:
            return _attach(Response(no_evidence_reply(result.tree), source_nodes=[]), result)
        response = self._synthesizer.synthesize(bundle, result.evidence, _extra(result, additional_source_nodes),
                                                **extra_vars)
        return _attach(response, result)

    @dispatcher.span
    async def asynthesize(
        self,
        query: QueryType,
        nodes: List[NodeWithScore],
        additional_source_nodes: Optional[Sequence[NodeWithScore]] = None,
        **extra_vars: Any,
    ) -> RESPONSE_TYPE:
        bundle = _bundle(query)
        result = await self._search.asearch(bundle.query_str, nodes=nodes, message_id=current_message_id())
        if not result.evidence and nodes:
            return _attach(Response(no_evidence_reply(result.tree), source_nodes=[]), result)
        response = await self._synthesizer.asynthesize(bundle, result.evidence,
                                                       _extra(result, additional_source_nodes), **extra_vars)
        return _attach(response, result)


def _bundle(query: QueryType) -> QueryBundle:
    return QueryBundle(query_str=query) if isinstance(query, str) else query


def _text_nodes(chunks: Sequence[str]) -> List[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=t, id_=f"chunk-{i}"), score=None) for i, t in enumerate(chunks)]


def _texts(nodes: Sequence[NodeWithScore]) -> List[str]:
    return [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]


def _extra(result: SearchResult, given: Optional[Sequence[NodeWithScore]]) -> List[NodeWithScore]:
    return [*result.sub_evidence, *(given if given is not None else [])]


def _attach(response: RESPONSE_TYPE, result: SearchResult) -> RESPONSE_TYPE:
    if isinstance(response, Response) and response.response is not None:
        result.tree.root.answer = response.response
    metadata = response.metadata if response.metadata is not None else {}
    metadata["judge_tree"] = result.tree
    metadata["judge_stats"] = result.tree.stats.to_dict()
    response.metadata = metadata
    return response
