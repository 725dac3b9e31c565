"""What one hybrid search ranked, before any text is read: :class:`FieldRequest` (one per searched field, for one or
several queries at once) and :class:`Ranking` (one per query: the kept ids and scores, each field's rank and score
for the trail, and the kept candidates' fields when the search returned them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from pymilvus import AnnSearchRequest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.schema import BM25, CollectionSpec


@dataclass(frozen=True)
class FieldRequest:
    """One per-field search for ``len(data)`` queries (one Milvus call, ``nq = len(data)``): each query's data
    (vector or raw text), the limit and the search params."""

    field: str
    data: List[Any]
    limit: int
    param: Dict[str, Any]

    def ann(self, expr: str) -> AnnSearchRequest:
        return AnnSearchRequest(data=list(self.data), anns_field=self.field, param=self.param, limit=self.limit,
                                expr=expr if expr else None)


@dataclass(frozen=True)
class Ranking:
    """One query's kept candidates ``(key, score)`` (key = primary key as a string), best first; their primary keys as
    Milvus returns them; each field's ``{key: (rank, score)}`` for the trail; the fusion stage name; and the kept
    candidates' output fields when the search returned them (``None`` when a lean search left them to fetch)."""

    kept: List[Tuple[str, float]]
    pks: Dict[str, Any]
    stages: List[Tuple[str, Dict[str, Tuple[int, float]]]]
    fused_stage: Optional[str]
    entities: Optional[Dict[str, Mapping[str, Any]]] = field(default=None)

    @cached_property
    def _at(self) -> Dict[str, int]:
        return {key: i for i, (key, _) in enumerate(self.kept)}

    def score(self, key: str) -> float:
        """The final score of a kept candidate."""
        return self.kept[self._at[key]][1]

    def trail(self, key: str) -> List[Tuple[str, int, float]]:
        """``(stage, rank, score)`` of a kept candidate: each searched field that found it, then the fusion."""
        out = [(stage, *positions[key]) for stage, positions in self.stages if key in positions]
        if self.fused_stage is not None:
            i = self._at[key]
            out.append((self.fused_stage, i + 1, self.kept[i][1]))
        return out

    def unknown(self, keys: Sequence[str]) -> List[Any]:
        """The primary keys among ``keys`` whose fields this ranking does not hold; a key that is not a kept
        candidate is an error naming the kept ones."""
        strangers = [k for k in keys if k not in self.pks]
        if strangers:
            raise ConfigurationError(f"key(s) {strangers} are not among this ranking's kept candidates; kept: "
                                     f"{[k for k, _ in self.kept]}")
        if self.entities is None:
            return [self.pks[k] for k in keys]
        return [self.pks[k] for k in keys if k not in self.entities]


def known_entities(per_field: Sequence[Any], pks: Mapping[str, Any]) -> Dict[str, Mapping[str, Any]]:
    """The output fields of the candidates in ``pks`` from the hits that carry them (the first list holding each)."""
    out: Dict[str, Mapping[str, Any]] = {}
    for hits in per_field:
        for h in hits:
            key = str(h["id"])
            if key in pks and key not in out:
                out[key] = h.get("entity", {})
    return out


def stage_label(spec: CollectionSpec, name: str) -> str:
    """The trail stage of a searched field: ``sparse:<field>`` for BM25, ``dense:<field>`` otherwise."""
    return ("sparse:" if spec.fields_by_name[name].kind == BM25 else "dense:") + name
