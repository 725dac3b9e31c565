"""Dense pseudo-relevance feedback for hybrid search (Rocchio, 1971, on embedding vectors).

After the first fusion of the dense and BM25 lists, the query vector moves towards the stored vectors of the
``docs`` best fused hits: ``q' = q + weight * mean(d_1 .. d_docs)``, rescaled to the query's norm. The dense field
is searched again with ``q'``, and a second fusion takes the first dense list, the BM25 list and the feedback
list, the dense field's weight split evenly between its two lists (0.25 / 0.5 / 0.25 by default: the query keeps
half of the dense side, as RM3 interpolates the original query with the feedback model). BM25 is not searched
again. The documents are chosen on the first fusion, where BM25 has read the whole chunk, so feedback carries what
BM25 matched past the model's window into the dense side.

``bench/fusion_variants.py`` compares it with the single-round fusion, with replacing the dense list by the
feedback list and with lexical (RM3-like) feedback (docs/RESULTS.md).

Pure functions only; :class:`~llama_index_convrag.retrievers.milvus_hybrid.MilvusHybridRetriever` does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Tuple

import numpy as np

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.schema import BM25, DENSE, CollectionSpec

#: Feedback documents and their weight when a caller gives none (``feedback=None`` on a weighted hybrid search).
DEFAULT_FEEDBACK_DOCS = 3
DEFAULT_FEEDBACK_WEIGHT = 0.5
FEEDBACK_KEYS = frozenset({"docs", "weight"})
#: Metrics under which a sum of vectors points where the query should go (not L2 / binary distances).
FEEDBACK_METRICS = frozenset({"COSINE", "IP"})


@dataclass(frozen=True)
class Feedback:
    """Validated feedback settings: the dense ``field`` re-searched, ``docs`` fused hits, their ``weight``."""

    field: str
    docs: int
    weight: float


def feedback_vector(query: Sequence[float], docs: Sequence[Sequence[float]], weight: float) -> list:
    """``q + weight * mean(docs)`` rescaled to ``|q|`` (the query itself when ``docs`` is empty)."""
    q = np.asarray(query, dtype=np.float64)
    if not docs:
        return q.tolist()
    moved = q + weight * np.asarray(docs, dtype=np.float64).mean(axis=0)
    norm_q, norm_m = float(np.linalg.norm(q)), float(np.linalg.norm(moved))
    if norm_m == 0.0:
        return q.tolist()
    scale = norm_q / norm_m if norm_q > 0 else 1.0
    return (moved * scale).tolist()


def _eligible(spec: CollectionSpec, search_type: str, fields: Tuple[str, ...], fusion_kind: str
              ) -> Tuple[Optional[str], str]:
    """``(dense field, "")`` when feedback can run on this search, else ``(None, why not)``."""
    if search_type != "hybrid" or fusion_kind != "weighted":
        return None, (f"feedback runs on hybrid search with weighted fusion, got search_type {search_type!r} "
                      f"and fusion {fusion_kind!r}")
    dense = [f for f in fields if spec.fields_by_name[f].kind == DENSE]
    if len(dense) != 1 or not any(spec.fields_by_name[f].kind == BM25 for f in fields):
        return None, f"feedback needs exactly one dense field and a BM25 field among the searched {list(fields)}"
    metric = spec.fields_by_name[dense[0]].metric.upper()
    if metric not in FEEDBACK_METRICS:
        return None, f"feedback needs a dense field indexed with {sorted(FEEDBACK_METRICS)}, {dense[0]!r} uses {metric!r}"
    return dense[0], ""


def validate_feedback(value: Any, spec: CollectionSpec, search_type: str, fields: Tuple[str, ...],
                      fusion_kind: str) -> Optional[Feedback]:
    """``None`` (the default: on wherever it can run), ``False`` (off) or ``{"docs": int, "weight": float}``."""
    if value is False:
        return None
    if value is not None and not isinstance(value, Mapping):
        raise ConfigurationError(f"feedback must be None (default), False (off) or a dict like "
                         f"{{'docs': {DEFAULT_FEEDBACK_DOCS}, 'weight': {DEFAULT_FEEDBACK_WEIGHT}}}, got {value!r}")
    field, why = _eligible(spec, search_type, fields, fusion_kind)
    if value is None:
        return None if field is None else Feedback(field, DEFAULT_FEEDBACK_DOCS, DEFAULT_FEEDBACK_WEIGHT)
    if field is None:
        raise ConfigurationError(why)
    unknown = sorted(set(value) - FEEDBACK_KEYS)
    if unknown:
        raise ConfigurationError(f"feedback accepts {sorted(FEEDBACK_KEYS)}, got unknown {unknown}")
    docs = value.get("docs", DEFAULT_FEEDBACK_DOCS)
    if isinstance(docs, bool) or not isinstance(docs, int) or docs < 1:
        raise ConfigurationError(f"feedback docs must be an int >= 1, got {docs!r}")
    weight = value.get("weight", DEFAULT_FEEDBACK_WEIGHT)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 < float(weight) <= 10.0:
        raise ConfigurationError(f"feedback weight must be a number in (0, 10], got {weight!r}")
    return Feedback(field, docs, float(weight))
