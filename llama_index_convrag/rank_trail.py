"""The rank trail: why a node ranked where it did, kept in its metadata but hidden from the LLM and embedder.

Each stage (a searched field, fusion, rerank, ...) appends ``{"stage", "rank", "score"}`` (1-based rank) plus
optional details. The key is added to the node's ``excluded_llm_metadata_keys`` and
``excluded_embed_metadata_keys`` so the trail never leaks into prompts or vectors.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from llama_index.core.schema import NodeWithScore
from llama_index_convrag.errors import ConfigurationError

TRAIL_KEY = "convrag_rank_trail"


def hide_key(node: Any, key: str) -> None:
    """Keep metadata ``key`` of ``node`` out of LLM prompts and embeddings."""
    for attr in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
        keys = getattr(node, attr)
        if key not in keys:
            keys.append(key)


def add_stage(
    nws: NodeWithScore, stage: str, rank: int, score: Optional[float], **details: Any
) -> NodeWithScore:
    """Append one stage to the node's trail (in place) and return it."""
    if rank < 1:
        raise ConfigurationError(f"rank must be >= 1, got {rank!r}")
    entry: Dict[str, Any] = {"stage": stage, "rank": rank, "score": None if score is None else float(score)}
    entry.update(details)
    trail = nws.node.metadata.setdefault(TRAIL_KEY, [])
    trail.append(entry)
    hide_key(nws.node, TRAIL_KEY)
    return nws


def add_stages(nws: NodeWithScore, stages: Sequence[Tuple[str, int, Optional[float]]]) -> NodeWithScore:
    """``add_stage`` for several ``(stage, rank, score)`` in order, hiding the key once."""
    trail = nws.node.metadata.setdefault(TRAIL_KEY, [])
    for stage, rank, score in stages:
        if rank < 1:
            raise ConfigurationError(f"rank must be >= 1, got {rank!r}")
        trail.append({"stage": stage, "rank": rank, "score": None if score is None else float(score)})
    hide_key(nws.node, TRAIL_KEY)
    return nws


def get_trail(nws: NodeWithScore) -> List[Dict[str, Any]]:
    """The node's trail, oldest stage first (empty if none)."""
    return list(nws.node.metadata.get(TRAIL_KEY, []))


def mark_ranked(nodes: List[NodeWithScore], stage: str, **details: Any) -> List[NodeWithScore]:
    """Record each node's current position and score under ``stage``."""
    for i, nws in enumerate(nodes, start=1):
        add_stage(nws, stage, i, nws.score, **details)
    return nodes
