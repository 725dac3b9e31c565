"""Stream helpers: a finished text as a one-delta stream, and citations filled in when a stream ends."""

from __future__ import annotations

from typing import Any, AsyncGenerator, Dict, Generator, List

from llama_index.core.schema import NodeWithScore

from llama_index_convrag.synthesizers import citations as cite


def gen_of(text: str) -> Generator[str, None, None]:
    yield text


async def agen_of(text: str) -> AsyncGenerator[str, None]:
    yield text


def cite_when_done(
    gen: Generator[str, None, None], metadata: Dict[str, Any], nodes: List[NodeWithScore]
) -> Generator[str, None, None]:
    text = ""
    for delta in gen:
        text += delta
        yield delta
    metadata.update(cite.citation_metadata(text, nodes))


async def acite_when_done(
    agen: AsyncGenerator[str, None], metadata: Dict[str, Any], nodes: List[NodeWithScore]
) -> AsyncGenerator[str, None]:
    text = ""
    async for delta in agen:
        text += delta
        yield delta
    metadata.update(cite.citation_metadata(text, nodes))
