"""Retrieval metrics (nDCG@k, Recall@k, MRR@k, hit rate@k) computed by ranx, and a retriever evaluation loop.

Why ranx (over ir-measures / pytrec_eval): it takes the ``{qid: {doc_id: score}}`` dictionaries we already
hold and gives per-query scores back by query id, ships as pure-Python wheels (numba, no C++ build of
trec_eval), and its metric definitions follow trec_eval (nDCG with linear gains, as BEIR reports it); its
``compare``/statistical tests are there when configurations need significance. Cost: numba compiles the
metric kernels on first use (about 50 s on 2 cores), then caches them beside the package.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import (Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from llama_index.core.instrumentation import get_dispatcher

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.evaluation.datasets import Qrels, Query
from llama_index_convrag.evaluation.report import latency_summary

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

Run = Dict[str, Dict[str, float]]
Ranked = Sequence[Tuple[str, float]]
RetrieveFn = Callable[[str], Ranked]
AsyncRetrieveFn = Callable[[str], Awaitable[Ranked]]

#: metric name -> ranx name prefix
METRICS: Dict[str, str] = {"ndcg": "ndcg", "recall": "recall", "mrr": "mrr", "hit_rate": "hit_rate"}
DEFAULT_METRICS: Tuple[str, ...] = ("ndcg", "recall", "mrr", "hit_rate")
DEFAULT_KS: Tuple[int, ...] = (10, 100)


def metric_names(metrics: Sequence[str] = DEFAULT_METRICS, ks: Sequence[int] = DEFAULT_KS) -> List[str]:
    """Validated ``"<metric>@<k>"`` names, metrics outer, ks inner (``ndcg@10, ndcg@100, recall@10, ...``)."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ConfigurationError(f"metrics must be among {sorted(METRICS)}, got {unknown!r}")
    bad = [k for k in ks if isinstance(k, bool) or not isinstance(k, int) or k < 1]
    if bad or not ks:
        raise ConfigurationError(f"ks must be positive integers, got {list(ks)!r}")
    if not metrics:
        raise ConfigurationError("metrics must not be empty")
    return [f"{m}@{k}" for m in metrics for k in ks]


@dataclass
class RetrievalMetrics:
    """Mean scores, per-query scores and bookkeeping for one evaluated run."""

    means: Dict[str, float]
    per_query: Dict[str, Dict[str, float]]
    evaluated_queries: int
    skipped_queries: List[str] = field(default_factory=list)


def judged_qrels(qrels: Mapping[str, Mapping[str, int]]) -> Tuple[Qrels, List[str]]:
    """Qrels restricted to queries with at least one positive grade, and the ids of those dropped."""
    kept: Qrels = {}
    dropped: List[str] = []
    for qid, docs in qrels.items():
        if any(grade > 0 for grade in docs.values()):
            kept[qid] = {d: int(g) for d, g in docs.items()}
        else:
            dropped.append(qid)
    return kept, dropped


def evaluate_run(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> RetrievalMetrics:
    """Score a run against qrels with ranx.

    Queries with no positive judgment are skipped (listed in ``skipped_queries``); judged queries absent
    from the run score 0; run queries without judgments are ignored. Ties in ``run`` scores are ordered
    by ranx, so pass strictly ordered scores when the order matters (``evaluate_retriever`` does).
    """
    names = metric_names(metrics, ks)
    kept, skipped = judged_qrels(qrels)
    if not kept:
        raise ConfigurationError("qrels hold no query with a positive relevance grade; nothing to evaluate")
    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import evaluate

    entries = {qid: {d: float(s) for d, s in run[qid].items()} for qid in kept if run.get(qid)}
    if not entries:  # nothing retrieved for any judged query (ranx cannot build an empty run)
        zeros = {name: 0.0 for name in names}
        return RetrievalMetrics(means=dict(zeros), per_query={qid: dict(zeros) for qid in kept},
                                evaluated_queries=len(kept), skipped_queries=skipped)
    ranx_run = RanxRun(entries)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's uint64->int64 cast notice inside ranx
        means = evaluate(RanxQrels(kept), ranx_run, names, return_mean=True, make_comparable=True)
    if isinstance(means, float):
        means = {names[0]: means}
    per_query = {qid: {name: float(ranx_run.scores[name][qid]) for name in names} for qid in kept}
    return RetrievalMetrics(
        means={name: float(means[name]) for name in names},
        per_query=per_query,
        evaluated_queries=len(kept),
        skipped_queries=skipped,
    )


def ranked_to_run_entry(ranked: Ranked) -> Dict[str, float]:
    """Rank-preserving scores for ranx from an ordered ``[(doc_id, score), ...]`` list.

    The list order is the ranking (a reranker's order wins over raw scores); a doc id seen twice (several
    chunks of one document) keeps its best rank.
    """
    entry: Dict[str, float] = {}
    n = len(ranked)
    for rank, (doc_id, _score) in enumerate(ranked):
        entry.setdefault(str(doc_id), float(n - rank))
    return entry


@dataclass
class RetrievalResult:
    """What ``evaluate_retriever`` measured: metrics, the ranked lists, and per-query latency."""

    metrics: RetrievalMetrics
    ranked: Dict[str, List[Tuple[str, float]]]
    latencies_s: Dict[str, float]

    @property
    def means(self) -> Dict[str, float]:
        return self.metrics.means

    def latency(self) -> Dict[str, float]:
        """count / mean / p50 / p95 / max in milliseconds."""
        return latency_summary(list(self.latencies_s.values()))

    def to_dict(self, top_n: int = 10) -> Dict[str, Any]:
        """JSON-ready: means, latency summary, and per query its scores, latency and top ``top_n`` ids."""
        return {
            "metrics": self.metrics.means,
            "evaluated_queries": self.metrics.evaluated_queries,
            "skipped_queries": self.metrics.skipped_queries,
            "latency": self.latency(),
            "per_query": {
                qid: {
                    "metrics": self.metrics.per_query.get(qid, {}),
                    "latency_ms": round(self.latencies_s[qid] * 1000.0, 3),
                    "top_ids": [d for d, _ in self.ranked[qid][:top_n]],
                }
                for qid in self.ranked
            },
        }


def _query_texts(queries: Union[Mapping[str, Union[str, Query]], Iterable[Query]]) -> Dict[str, str]:
    if isinstance(queries, Mapping):
        return {str(qid): q.text if isinstance(q, Query) else str(q) for qid, q in queries.items()}
    return {q.query_id: q.text for q in queries}


def as_ranked(qid: str, ranked: Any) -> List[Tuple[str, float]]:
    """Validate a retriever's result as ``[(doc_id, score), ...]`` (ids as str), naming the query on failure."""
    try:
        return [(str(doc_id), float(score)) for doc_id, score in ranked]
    except (TypeError, ValueError) as exc:
        raise ArgumentTypeError(
            f"retrieve_fn must return a list of (doc_id, score) pairs; for query {qid!r} it returned "
            f"{type(ranked).__name__}: {ranked!r:.200}"
        ) from exc


class _Collector:
    """Shared bookkeeping of the sync and async evaluation loops."""

    def __init__(self, queries: Any, qrels: Mapping[str, Mapping[str, int]], ks: Sequence[int],
                 metrics: Sequence[str], progress: bool) -> None:
        metric_names(metrics, ks)
        texts = _query_texts(queries)
        kept, _ = judged_qrels(qrels)
        self.todo = {qid: text for qid, text in texts.items() if qid in kept}
        if not self.todo:
            raise ConfigurationError(f"none of the {len(texts)} queries has a positive judgment in qrels")
        self.qrels, self.ks, self.metrics, self.progress = qrels, ks, metrics, progress
        self.ranked: Dict[str, List[Tuple[str, float]]] = {}
        self.latencies: Dict[str, float] = {}

    def items(self) -> Iterable[Tuple[str, str]]:
        if not self.progress:
            return self.todo.items()
        from tqdm.auto import tqdm

        return tqdm(self.todo.items(), total=len(self.todo), desc="queries", unit="q")

    def add(self, qid: str, started: float, result: Any) -> None:
        self.latencies[qid] = time.perf_counter() - started
        self.ranked[qid] = as_ranked(qid, result)

    def finish(self) -> RetrievalResult:
        run = {qid: ranked_to_run_entry(items) for qid, items in self.ranked.items()}
        scored = evaluate_run(run, {qid: self.qrels[qid] for qid in self.ranked}, ks=self.ks, metrics=self.metrics)
        return RetrievalResult(metrics=scored, ranked=self.ranked, latencies_s=self.latencies)


@dispatcher.span
def evaluate_retriever(
    retrieve_fn: RetrieveFn,
    queries: Union[Mapping[str, Union[str, Query]], Iterable[Query]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    metrics: Sequence[str] = DEFAULT_METRICS,
    progress: bool = False,
) -> RetrievalResult:
    """Run ``retrieve_fn(query_text) -> [(doc_id, score), ...]`` over every judged query and score it.

    Queries run one at a time so each latency is the retriever's own (wall clock, ``perf_counter``);
    ``progress=True`` shows a tqdm bar.
    """
    collector = _Collector(queries, qrels, ks, metrics, progress)
    for qid, text in collector.items():
        started = time.perf_counter()
        collector.add(qid, started, retrieve_fn(text))
    return collector.finish()


@dispatcher.span
async def aevaluate_retriever(
    aretrieve_fn: AsyncRetrieveFn,
    queries: Union[Mapping[str, Union[str, Query]], Iterable[Query]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    metrics: Sequence[str] = DEFAULT_METRICS,
    progress: bool = False,
) -> RetrievalResult:
    """Async twin of :func:`evaluate_retriever` (queries awaited one at a time, for honest latency)."""
    collector = _Collector(queries, qrels, ks, metrics, progress)
    for qid, text in collector.items():
        started = time.perf_counter()
        collector.add(qid, started, await aretrieve_fn(text))
    return collector.finish()


def nodes_to_ranked(nodes: Sequence[Any], id_key: Optional[str] = None) -> List[Tuple[str, float]]:
    """Adapt LlamaIndex ``NodeWithScore`` results: ``(node.ref_doc_id or node_id, score)``.

    With ``id_key`` the document id is read from ``node.metadata[id_key]`` instead.
    """
    out = []
    for item in nodes:
        node = getattr(item, "node", item)
        if id_key is not None:
            doc_id = node.metadata[id_key]
        else:
            doc_id = node.ref_doc_id if node.ref_doc_id is not None else node.node_id
        score = getattr(item, "score", None)
        out.append((str(doc_id), float(score) if score is not None and not math.isnan(score) else 0.0))
    return out
