"""Retriever parameters, validated once against a collection's :class:`CollectionSpec`.

Every error names the bad value and the accepted ones. Defaults (one set, shared by ``as_retriever``,
``as_query_engine``, ``as_chat_engine`` and the CLI; measured in ``bench/quality_matrix.py``):

* ``search_type``: ``hybrid`` when the collection has a dense and a BM25 field (or ``search_fields`` names two or
  more), else the kind of the one searchable field; hybrid beat dense and BM25 alone on SciFact, Cranfield and
  CAsT passages.
* ``ranker_type``: ``weighted`` (per-query min-max normalised, equal weights, 100 candidates per field); it beat
  RRF on every collection measured (figures: README, ``bench/quality_matrix.py``).
* ``search_fields``: dense -> the first dense field; sparse -> the first BM25 field; hybrid -> both.
* ``search_params``: dense -> ``{"metric_type": <index metric>, "params": {}}``; BM25 ->
  ``{"metric_type": "BM25", "params": {"drop_ratio_search": 0.0}}``.
* ``ranker_params``: rrf ``{"k": 60}``; weighted ``{"weights": [1/n] * n}``; model ``{"model": <postprocessor>,
  "pre_topk": 10, "pre_ranker_type": "weighted", "pre_ranker_params": {"weights": [1/n] * n}}``.
* ``fusion_depth`` (candidates per field before client-side fusion): weighted -> ``max(100, top_k)`` (normalised
  fusion is best over long lists); rrf -> ``top_k`` (RRF over long lists is worse, see ANCHORS).
* ``feedback`` (dense pseudo-relevance feedback, :mod:`~llama_index_convrag.retrievers.feedback`): on, 3 documents
  weight 0.5, wherever it can run (hybrid, weighted fusion, one COSINE/IP dense field and a BM25 field); ``False``
  turns it off. It gained on SciFact and Cranfield and held even on CAsT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.filters import filters_to_expr
from llama_index_convrag.milvus.schema import BM25, DENSE, CollectionSpec
from llama_index_convrag.retrievers.feedback import Feedback, validate_feedback
from llama_index_convrag.retrievers.modes import DEFAULT_RANKER_TYPE, PRE_RANKER_TYPES, RANKER_TYPES, SEARCH_TYPES
DEFAULT_RRF_K = 60
DEFAULT_PRE_TOPK = 10
WEIGHTED_MIN_DEPTH = 100
_RANKER_KEYS = {
    "rrf": {"k"},
    "weighted": {"weights"},
    "model": {"model", "pre_topk", "pre_ranker_type", "pre_ranker_params"},
}


@dataclass(frozen=True)
class RetrieverParams:
    """Validated, complete retriever parameters (build with :func:`validate_params`)."""

    similarity_top_k: int
    search_type: str
    search_fields: Tuple[str, ...]
    search_params: Dict[str, Dict[str, Any]]
    ranker_type: str
    ranker_params: Dict[str, Any]
    filters: Optional[MetadataFilters]
    filter_expr: str
    fusion_depth: int
    explain: bool
    fusion_depth_arg: Optional[int] = None
    feedback: Optional[Feedback] = None

    def fusion(self) -> Tuple[str, Dict[str, Any]]:
        """The (type, params) that fuse the per-field lists (the pre-ranker under ``model``)."""
        if self.ranker_type == "model":
            return self.ranker_params["pre_ranker_type"], self.ranker_params["pre_ranker_params"]
        return self.ranker_type, self.ranker_params

    def candidates(self) -> int:
        """How many fused candidates to produce (``pre_topk`` under ``model``)."""
        return self.ranker_params["pre_topk"] if self.ranker_type == "model" else self.similarity_top_k


def _choice(name: str, value: Any, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ConfigurationError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")
    return value


def default_search_type(spec: CollectionSpec, fields: Optional[Sequence[str]] = None) -> str:
    """``hybrid`` when two or more fields are named (or, with none named, the collection has a dense and a BM25
    field); else the kind of the one field (``dense`` or ``sparse``)."""
    if isinstance(fields, str):
        fields = [fields]
    if fields is not None and len(fields) > 1:
        return "hybrid"
    if fields is not None and len(fields) == 1:
        return "sparse" if fields[0] in spec.bm25_fields else "dense"
    if spec.dense_fields and spec.bm25_fields:
        return "hybrid"
    return "dense" if spec.dense_fields or not spec.bm25_fields else "sparse"


def _fields(spec: CollectionSpec, search_type: str, fields: Optional[Sequence[str]]) -> Tuple[str, ...]:
    dense, bm25 = spec.dense_fields, spec.bm25_fields
    searchable = dense + bm25
    if fields is None:
        if search_type == "dense":
            if not dense:
                raise ConfigurationError(f"search_type 'dense' needs a dense field; the collection has {list(searchable)}")
            return (dense[0],)
        if search_type == "sparse":
            if not bm25:
                raise ConfigurationError(f"search_type 'sparse' needs a BM25 field; the collection has {list(searchable)}")
            return (bm25[0],)
        if not dense or not bm25:
            raise ConfigurationError(f"search_type 'hybrid' without search_fields needs a dense and a BM25 field; "
                             f"the collection has dense {list(dense)} and BM25 {list(bm25)}")
        return (dense[0], bm25[0])
    if isinstance(fields, str):
        fields = [fields]
    fields = tuple(fields)
    if not fields:
        raise ConfigurationError(f"search_fields must name at least one of {list(searchable)}, got []")
    for f in fields:
        if f not in spec.fields_by_name:
            raise ConfigurationError(f"unknown search field {f!r}; vector fields: {list(searchable)}")
        kind = spec.fields_by_name[f].kind
        if kind not in (DENSE, BM25):
            raise ConfigurationError(f"field {f!r} is a client-encoded sparse field (no query encoder here); "
                             f"searchable fields: {list(searchable)}")
    if len(set(fields)) != len(fields):
        raise ConfigurationError(f"search_fields has duplicates: {list(fields)}")
    if search_type != "hybrid" and len(fields) > 1:
        raise ConfigurationError(f"search_type {search_type!r} searches one field, got {list(fields)}; use 'hybrid'")
    if search_type == "hybrid" and len(fields) < 2:
        raise ConfigurationError(f"search_type 'hybrid' needs two or more fields, got {list(fields)}")
    want = {"dense": DENSE, "sparse": BM25}.get(search_type)
    if want is not None and spec.fields_by_name[fields[0]].kind != want:
        accepted = list(dense if want == DENSE else bm25)
        raise ConfigurationError(f"search_type {search_type!r} needs a {want} field, got {fields[0]!r}; accepted: {accepted}")
    return fields


def _search_params(spec: CollectionSpec, fields: Tuple[str, ...], given: Optional[Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
    defaults = {}
    for f in fields:
        vf = spec.fields_by_name[f]
        if vf.kind == BM25:
            defaults[f] = {"metric_type": "BM25", "params": {"drop_ratio_search": 0.0}}
        else:
            defaults[f] = {"metric_type": vf.metric, "params": {}}
    if given is None:
        return defaults
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ConfigurationError(f"search_params names fields not searched: {unknown}; searched fields: {list(fields)}")
    missing = [f for f in fields if f not in given]
    if missing:
        raise ConfigurationError(f"search_params must give params for every searched field; missing {missing} "
                         f"(searched fields: {list(fields)})")
    out = {}
    for f in fields:
        p = given[f]
        if not isinstance(p, Mapping):
            raise ConfigurationError(f"search_params[{f!r}] must be a dict like {defaults[f]}, got {p!r}")
        vf = spec.fields_by_name[f]
        for key in ("data", "vector", "embedding"):
            if key in p:
                what = "a BM25 field takes the raw query text, not a vector" if vf.kind == BM25 else \
                    "the query vector comes from the embedding model"
                raise ConfigurationError(f"search_params[{f!r}] must not contain {key!r}: {what}")
        metric = str(p.get("metric_type", defaults[f]["metric_type"])).upper()
        if vf.kind == BM25 and metric != "BM25":
            raise ConfigurationError(f"BM25 field {f!r} takes metric_type 'BM25', got {metric!r}")
        if vf.kind == DENSE and metric != vf.metric.upper():
            raise ConfigurationError(f"dense field {f!r} is indexed with metric {vf.metric!r}, got {metric!r}")
        merged = {"metric_type": metric, "params": dict(p.get("params", {}))}
        extra = sorted(set(p) - {"metric_type", "params"})
        if extra:
            raise ConfigurationError(f"search_params[{f!r}] accepts ['metric_type', 'params'], got extra {extra}")
        out[f] = merged
    return out


def _weights(value: Any, fields: Tuple[str, ...]) -> Tuple[float, ...]:
    if value is None:
        return tuple(1.0 / len(fields) for _ in fields)
    if not isinstance(value, (list, tuple)) or len(value) != len(fields):
        raise ConfigurationError(f"weights needs one value per searched field {list(fields)} ({len(fields)}), got {value!r}")
    for w in value:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 <= float(w) <= 1.0:
            raise ConfigurationError(f"each weight must be in [0, 1], got {w!r} in {list(value)}")
    return tuple(float(w) for w in value)


def _fusion_params(kind: str, given: Optional[Mapping[str, Any]], fields: Tuple[str, ...], label: str) -> Dict[str, Any]:
    given = dict(given) if given is not None else {}
    unknown = sorted(set(given) - _RANKER_KEYS[kind])
    if unknown:
        raise ConfigurationError(f"{label} for {kind!r} accepts {sorted(_RANKER_KEYS[kind])}, got unknown {unknown}")
    if kind == "rrf":
        k = given.get("k", DEFAULT_RRF_K)
        if isinstance(k, bool) or not isinstance(k, (int, float)) or k < 0:
            raise ConfigurationError(f"rrf k must be a number >= 0, got {k!r}")
        return {"k": k}
    return {"weights": _weights(given.get("weights"), fields)}


def _ranker_params(ranker_type: str, given: Optional[Mapping[str, Any]], fields: Tuple[str, ...]) -> Dict[str, Any]:
    if ranker_type != "model":
        return _fusion_params(ranker_type, given, fields, "ranker_params")
    given = dict(given) if given is not None else {}
    unknown = sorted(set(given) - _RANKER_KEYS["model"])
    if unknown:
        raise ConfigurationError(f"ranker_params for 'model' accepts {sorted(_RANKER_KEYS['model'])}, got unknown {unknown}")
    model = given.get("model")
    if not isinstance(model, BaseNodePostprocessor):
        raise ConfigurationError(f"ranker_params['model'] must be a LlamaIndex BaseNodePostprocessor, got {model!r}")
    pre_type = _choice("pre_ranker_type", given.get("pre_ranker_type", DEFAULT_RANKER_TYPE), PRE_RANKER_TYPES)
    pre_params = given.get("pre_ranker_params", {"k": DEFAULT_RRF_K} if pre_type == "rrf" else None)
    return {
        "model": model,
        "pre_topk": _positive_int("pre_topk", given.get("pre_topk", DEFAULT_PRE_TOPK)),
        "pre_ranker_type": pre_type,
        "pre_ranker_params": _fusion_params(pre_type, pre_params, fields, "pre_ranker_params"),
    }


def validate_params(
    spec: CollectionSpec,
    *,
    similarity_top_k: int = 10,
    search_type: Optional[str] = None,
    search_fields: Optional[Sequence[str]] = None,
    search_params: Optional[Mapping[str, Any]] = None,
    ranker_type: str = DEFAULT_RANKER_TYPE,
    ranker_params: Optional[Mapping[str, Any]] = None,
    filters: Optional[MetadataFilters] = None,
    fusion_depth: Optional[int] = None,
    explain: bool = False,
    feedback: Any = None,
) -> RetrieverParams:
    """Check every argument against ``spec`` and fill defaults (see the module docstring)."""
    top_k = _positive_int("similarity_top_k", similarity_top_k)
    if search_type is None:
        search_type = default_search_type(spec, search_fields)
    search_type = _choice("search_type", search_type, SEARCH_TYPES)
    ranker_type = _choice("ranker_type", ranker_type, RANKER_TYPES)
    fields = _fields(spec, search_type, search_fields)
    sparams = _search_params(spec, fields, search_params)
    rparams = _ranker_params(ranker_type, ranker_params, fields)
    if filters is not None and not isinstance(filters, MetadataFilters):
        raise ConfigurationError(f"filters must be llama_index MetadataFilters, got {type(filters).__name__}")
    expr = filters_to_expr(filters, spec.metadata_ref)
    fusion_kind = rparams["pre_ranker_type"] if ranker_type == "model" else ranker_type
    wanted = rparams["pre_topk"] if ranker_type == "model" else top_k
    if fusion_depth is None:
        depth = max(WEIGHTED_MIN_DEPTH, wanted) if fusion_kind == "weighted" else wanted
    else:
        depth = _positive_int("fusion_depth", fusion_depth)
        if depth < wanted:
            raise ConfigurationError(f"fusion_depth must be >= the number of fused results ({wanted}), got {depth}")
    fb = validate_feedback(feedback, spec, search_type, fields, fusion_kind)
    return RetrieverParams(top_k, search_type, fields, sparams, ranker_type, rparams, filters, expr, depth,
                           bool(explain), fusion_depth, fb)


PARAM_NAMES = frozenset({"similarity_top_k", "search_type", "search_fields", "search_params", "ranker_type",
                         "ranker_params", "filters", "fusion_depth", "explain", "feedback"})
