"""One recall's Milvus calls and what they rank, as pure helpers (the drivers are in :mod:`.episodic`).

A recall makes two searches of the conversation's rows below the recent window: one dense (the query's vector) and
one BM25 (its text), each over both kinds of row (:mod:`.episodic_schema`) with ``2 x depth`` hits, ids and scores
only (a row's id names its position and kind; hits that carry their fields cost more than the ``get`` after).
Each result is split by kind into two ranked lists of at most ``depth`` (own text, context text), giving the four
lists the rules weigh: own dense, own BM25, context dense, context BM25. They are fused client-side (min-max
normalised, weighted: :func:`~llama_index_convrag.retrievers.fusion.weighted`); then one ``get`` reads the best
candidates' fields the row cache lacks (:mod:`.episodic_rows`).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.episodic_schema import CONTEXT, CONTEXT_SUFFIX, DENSE_FIELD, KIND_NAMES, OWN, SPARSE_FIELD
from llama_index_convrag.memory.rules import RecallRules
from llama_index_convrag.milvus.calls import MilvusCall
from llama_index_convrag.milvus.filters import quote_string
from llama_index_convrag.retrievers import fusion
from llama_index_convrag.retrievers.ranking import Ranking

#: Each search asks for this many times ``depth`` hits (both kinds share one search; each list keeps ``depth``).
#: 2: the default recalls 0.792 at 10 on LoCoMo against 0.795 with one search per list (bench/memory_recall.py).
KINDS_PER_SEARCH = 2
FUSION_STAGE = "fusion:weighted"
DENSE_PARAMS: Dict[str, Any] = {"metric_type": "COSINE", "params": {}}
BM25_PARAMS: Dict[str, Any] = {"metric_type": "BM25", "params": {"drop_ratio_search": 0.0}}


def check_scope(owner: str, conversation_id: str) -> None:
    for name, value in (("owner", owner), ("conversation_id", conversation_id)):
        if not isinstance(value, str) or not value:
            raise ConfigurationError(f"{name} must be a non-empty string, got {value!r}")


def scope_expr(owner: str, conversation_id: str) -> str:
    """The Milvus expression of one owner's conversation."""
    check_scope(owner, conversation_id)
    return f"owner == {quote_string(owner)} and conversation_id == {quote_string(conversation_id)}"


def search_expr(owner: str, conversation_id: str, before: Optional[int]) -> str:
    """Owner, conversation, and (``before`` given) positions below the recent window."""
    expr = scope_expr(owner, conversation_id)
    if before is None:
        return expr
    if isinstance(before, bool) or not isinstance(before, int) or before < 0:
        raise ConfigurationError(f"before must be None or an int >= 0 (the window's first position), got {before!r}")
    return f"{expr} and position < {before}"


def search_calls(collection_name: str, expr: str, vector: Sequence[float], text: str,
                 rules: RecallRules) -> List[MilvusCall]:
    """The dense search (the query's vector) and the BM25 search (its text) of one recall in ``collection_name``."""
    limit = KINDS_PER_SEARCH * rules.depth
    return [MilvusCall("search", (collection_name,), {"data": [data], "anns_field": field_name, "limit": limit,
                                                      "filter": expr, "search_params": params, "output_fields": []})
            for field_name, data, params in ((DENSE_FIELD, list(vector), DENSE_PARAMS),
                                             (SPARSE_FIELD, text, BM25_PARAMS))]


def position_kind(row_id: str) -> Tuple[int, int]:
    """A row's position and kind from its id (``<scope>:<position>``, ``:c`` after it for the context row)."""
    kind = CONTEXT if row_id.endswith(CONTEXT_SUFFIX) else OWN
    return int(row_id.split(":")[1]), kind


def hit_pairs(hits: Sequence[Mapping[str, Any]]) -> Iterable[Tuple[Any, Any]]:
    """``(id, distance)`` of each hit, best first: from the result's ``ids`` and ``distances`` columns when it has
    them (pymilvus' hits of one query), else from each hit."""
    ids, distances = getattr(hits, "ids", None), getattr(hits, "distances", None)
    if ids is not None and distances is not None:
        return zip(ids, distances)
    return ((h["id"], h["distance"]) for h in hits)


def split(hits: Sequence[Mapping[str, Any]], depth: int) -> Dict[int, List[Tuple[str, float]]]:
    """One search's hits as two ranked lists ``{kind: [(key, score)]}`` of at most ``depth`` each (key: the
    message's position as text)."""
    out: Dict[int, List[Tuple[str, float]]] = {OWN: [], CONTEXT: []}
    for row_id, distance in hit_pairs(hits):
        position, kind = position_kind(str(row_id))
        ranked = out[kind]
        if len(ranked) < depth:
            ranked.append((str(position), float(distance)))
    return out


def rank(dense: Sequence[Mapping[str, Any]], bm25: Sequence[Mapping[str, Any]], rules: RecallRules) -> Ranking:
    """The fused :class:`Ranking` of the four lists (the best ``depth``; the trail names each list that found a
    message)."""
    by_dense, by_bm25 = split(dense, rules.depth), split(bm25, rules.depth)
    named = [(f"dense:{KIND_NAMES[OWN]}", by_dense[OWN]), (f"sparse:{KIND_NAMES[OWN]}", by_bm25[OWN]),
             (f"dense:{KIND_NAMES[CONTEXT]}", by_dense[CONTEXT]), (f"sparse:{KIND_NAMES[CONTEXT]}", by_bm25[CONTEXT])]
    kept = [(str(key), score) for key, score in fusion.weighted([ranked for _, ranked in named], rules.weights())]
    kept = kept[:rules.depth]
    stages = []
    for label, ranked in named:
        at = {key: i for i, (key, _) in enumerate(ranked)}
        stages.append((label, {key: (at[key] + 1, ranked[at[key]][1]) for key, _ in kept if key in at}))
    return Ranking(kept=kept, pks={key: key for key, _ in kept}, stages=stages, fused_stage=FUSION_STAGE)


def owned(rows: Sequence[Mapping[str, Any]], owner: str, conversation_id: str) -> List[Mapping[str, Any]]:
    """The rows of ``owner``'s conversation only."""
    return [r for r in rows if r.get("owner") == owner and r.get("conversation_id") == conversation_id]
