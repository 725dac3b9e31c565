"""Helpers for the postprocessor tests: hand-built nodes, a recording scorer, captured instrumentation events."""

from __future__ import annotations

from typing import Any, Iterator, List, Optional, Sequence

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.postprocessors.scorers.base import Scorer
from tests.fakes import EventCollector


def make_nodes(
    texts: Sequence[str], scores: Optional[Sequence[Optional[float]]] = None,
    embeddings: Optional[Sequence[Sequence[float]]] = None,
) -> List[NodeWithScore]:
    """Nodes with ids n0, n1, ... in the given order."""
    out = []
    for i, text in enumerate(texts):
        emb = None if embeddings is None else list(embeddings[i])
        out.append(NodeWithScore(node=TextNode(id_=f"n{i}", text=text, embedding=emb),
                                 score=None if scores is None else scores[i]))
    return out


class TableScorer(Scorer):
    """Scores from a text -> score table; records every call; optionally raises."""

    def __init__(self, table: dict, fail: Optional[Exception] = None) -> None:
        self.table = table
        self.fail = fail
        self.calls: List[tuple] = []

    @property
    def name(self) -> str:
        return "table"

    def score(self, query: str, texts: Sequence[str]) -> List[float]:
        self.calls.append((query, list(texts)))
        if self.fail is not None:
            raise self.fail
        return [self.table[t] for t in texts]


@pytest.fixture
def events() -> Iterator[List[BaseEvent]]:
    """Instrumentation events emitted during the test, in order."""
    root = get_dispatcher()
    collector = EventCollector(events=[])
    root.add_event_handler(collector)
    yield collector.events
    root.event_handlers.remove(collector)


def ids(nodes: Sequence[NodeWithScore]) -> List[str]:
    return [n.node.node_id for n in nodes]
