"""Small pure helpers of one chat turn, shared by the sync and async paths of the engine."""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Sequence, Tuple

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.llms.llm import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore

from llama_index_convrag.chat.budget import message_fit_in
from llama_index_convrag.chat.records import TurnRecord
from llama_index_convrag.chat.rewrite import RewriteResult
from llama_index_convrag.rank_trail import get_trail
from llama_index_convrag.storage.conversation.base import Citation

fit = message_fit_in


def apply_rewrite(record: TurnRecord, result: RewriteResult) -> None:
    record.retrieval_query = result.query
    record.rewrite_strategy = result.strategy
    record.rewrite_used_llm = result.used_llm
    record.rewrite_latency_ms = result.latency_ms
    record.rewrite_fallback_reason = result.fallback_reason
    record.rewrite_skipped_reason = result.skipped_reason
    record.rewrite_cache_hit = result.cache_hit


def stage_names(postprocessors: Sequence[BaseNodePostprocessor]) -> List[Tuple[str, BaseNodePostprocessor]]:
    """``(stage name, postprocessor)``: the class name, suffixed ``#2``... when repeated."""
    seen: Dict[str, int] = {}
    out = []
    for pp in postprocessors:
        name = type(pp).__name__
        seen[name] = seen.get(name, 0) + 1
        out.append((name if seen[name] == 1 else f"{name}#{seen[name]}", pp))
    return out


def group_turns(history: Sequence[ChatMessage]) -> List[List[ChatMessage]]:
    """Split history into turns; a turn starts at each user message (leading non-user messages form one turn)."""
    turns: List[List[ChatMessage]] = []
    for m in history:
        if m.role == MessageRole.USER or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns


def system_text(synthesizer: Any, llm: LLM) -> str:
    """The synthesizer's QA template without its variables (the fixed prompt text to budget for)."""
    try:  # _get_prompts: this level only, without get_prompts' deep copies of every sub-module
        getter = getattr(synthesizer, "_get_prompts", None)
        prompts = getter() if getter is not None else synthesizer.get_prompts()
    except Exception:  # noqa: BLE001 - a synthesizer without PromptMixin: nothing to count
        return ""
    for key, prompt in prompts.items():
        if key.endswith("text_qa_template"):
            try:
                template = prompt.get_template(llm=llm)
            except TypeError:
                template = prompt.get_template()
            return template.replace("{context_str}", "").replace("{query_str}", "")
    return ""


def sync_deltas(response: Any) -> Iterator[str]:
    if isinstance(response, StreamingResponse) and response.response_gen is not None:
        return response.response_gen
    return iter([str(response)])


async def aiter_one(text: str) -> AsyncIterator[str]:
    yield text


def async_deltas(response: Any) -> AsyncIterator[str]:
    if isinstance(response, AsyncStreamingResponse):
        return response.async_response_gen()
    if isinstance(response, StreamingResponse) and response.response_gen is not None:
        return _aiter_sync(response.response_gen)
    return aiter_one(str(response))


async def _aiter_sync(gen: Iterator[str]) -> AsyncIterator[str]:
    for delta in gen:
        yield delta


async def aread_text(response: Any) -> str:
    if isinstance(response, (AsyncStreamingResponse, StreamingResponse)):
        return "".join([d async for d in async_deltas(response)])
    return str(response)


def _get(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def build_citations(response: Any, nodes: Sequence[NodeWithScore]) -> List[Citation]:
    """Citations from ``response.metadata['citations']`` (our synthesizer fills it, for streams when they end),
    else every source with marker None. ``source_index`` refers to the response's source nodes."""
    sources = list(getattr(response, "source_nodes", None) or nodes)
    metadata = getattr(response, "metadata", None) or {}
    raw = metadata.get("citations")
    if not raw:
        return [_citation(nws, i, None) for i, nws in enumerate(sources)]
    out = []
    for item in raw:
        index = _get(item, "source_index")
        if index is None or not 0 <= int(index) < len(sources):
            continue
        out.append(_citation(sources[int(index)], int(index), _get(item, "marker")))
    return out


def _citation(nws: NodeWithScore, index: int, marker: Optional[int]) -> Citation:
    return Citation(node_id=nws.node.node_id, source_index=index, marker=None if marker is None else int(marker),
                    ref_doc_id=nws.node.ref_doc_id, score=None if nws.score is None else float(nws.score),
                    stage_scores=get_trail(nws), text=nws.node.get_content()[:500])


__all__ = ["TurnRecord", "apply_rewrite", "build_citations", "fit", "group_turns", "stage_names", "system_text"]
