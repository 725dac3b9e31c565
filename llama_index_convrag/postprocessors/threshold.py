"""SimilarityThreshold: drop nodes scoring under a threshold, on the final score or a rank-trail stage's score.

``score_kind="final"`` reads ``NodeWithScore.score`` (LangChain's ``similarity_score_threshold`` search);
any other value names a stage in the node's rank trail (``"rerank"``, ``"dense"``, ...) and reads that stage's
latest score, so a threshold can apply to, say, the dense cosine even after fusion replaced the final score.
"""

from __future__ import annotations

from typing import List, Optional

from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.postprocessors.events import NodeSelectionEndEvent, NodeSelectionStartEvent
from llama_index_convrag.rank_trail import get_trail

dispatcher = get_dispatcher(__name__)

FINAL = "final"
ON_MISSING = ("raise", "keep", "drop")


def score_of(nws: NodeWithScore, score_kind: str) -> Optional[float]:
    """The node's final score, or the score of the latest trail entry of stage ``score_kind`` (None if absent)."""
    if score_kind == FINAL:
        return nws.score
    for entry in reversed(get_trail(nws)):
        if entry.get("stage") == score_kind:
            return entry.get("score")
    return None


def passes(score: float, threshold: float, higher_is_better: bool) -> bool:
    return score >= threshold if higher_is_better else score <= threshold


class SimilarityThreshold(BaseNodePostprocessor):
    """Keep nodes whose chosen score passes ``threshold`` (``>=``, or ``<=`` for distances); order is kept."""

    threshold: float = Field(description="Cut-off score.")
    score_kind: str = Field(default=FINAL, description="'final' or the name of a rank-trail stage.")
    higher_is_better: bool = Field(default=True, description="False for distances (keep score <= threshold).")
    on_missing: str = Field(default="raise", description="Node without that score: 'raise', 'keep' or 'drop'.")
    min_keep: int = Field(default=0, description="Always keep this many leading nodes, whatever their score.")

    def __init__(
        self,
        threshold: float,
        *,
        score_kind: str = FINAL,
        higher_is_better: bool = True,
        on_missing: str = "raise",
        min_keep: int = 0,
    ) -> None:
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or threshold != threshold:
            raise ConfigurationError(f"threshold must be a number, got {threshold!r}")
        if not isinstance(score_kind, str) or not score_kind:
            raise ConfigurationError(f"score_kind must be 'final' or a rank-trail stage name, got {score_kind!r}")
        if on_missing not in ON_MISSING:
            raise ConfigurationError(f"on_missing must be one of {list(ON_MISSING)}, got {on_missing!r}")
        if min_keep < 0:
            raise ConfigurationError(f"min_keep must be >= 0, got {min_keep!r}")
        super().__init__(threshold=float(threshold), score_kind=score_kind, higher_is_better=higher_is_better,
                         on_missing=on_missing, min_keep=min_keep)

    @classmethod
    def class_name(cls) -> str:
        return "SimilarityThreshold"

    def _keep(self, position: int, nws: NodeWithScore) -> bool:
        if position < self.min_keep:
            return True
        score = score_of(nws, self.score_kind)
        if score is None:
            if self.on_missing == "raise":
                stages = sorted({e.get("stage") for e in get_trail(nws)})
                raise ConfigurationError(
                    f"node {nws.node.node_id!r} has no {self.score_kind!r} score (trail stages: {stages}); "
                    f"set on_missing to 'keep' or 'drop' to allow this"
                )
            return self.on_missing == "keep"
        return passes(score, self.threshold, self.higher_is_better)

    def _postprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        dispatcher.event(NodeSelectionStartEvent(
            component=self.class_name(), query=query_bundle, nodes=nodes,
            params={"threshold": self.threshold, "score_kind": self.score_kind, "min_keep": self.min_keep},
        ))
        kept = [n for i, n in enumerate(nodes) if self._keep(i, n)]
        dispatcher.event(NodeSelectionEndEvent(component=self.class_name(), nodes=kept,
                                               num_dropped=len(nodes) - len(kept)))
        return kept

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: List[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> List[NodeWithScore]:
        # Pure CPU work on scores already present: no thread hop needed.
        return self._postprocess_nodes(nodes, query_bundle)
