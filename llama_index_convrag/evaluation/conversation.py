"""Replay multi-turn data sets: retrieval quality per query-rewrite strategy, and the rewrite effect.

A strategy is a callable ``(history_turns, utterance) -> query``. ``history_turns`` are the dialogue's
earlier :class:`ConversationTurn` records; a fair strategy reads their ``utterance`` (and ``answer`` where the
setting shows answers) but not ``rewrite``, which is the human gold. Two strategies are always evaluated:
``"raw"`` (the utterance as typed, the baseline) and, when every turn has a human rewrite, ``"manual"`` (the
ceiling). A chat engine's own per-turn records (plain dicts) can be scored beside them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from llama_index.core.instrumentation import get_dispatcher

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError, RecordNotFoundError
from llama_index_convrag.conversational.contextualize import HistoryTurn, contextualize
from llama_index_convrag.evaluation.answers import exact_match, token_f1
from llama_index_convrag.evaluation.datasets import ConversationTurn, Dialogue
from llama_index_convrag.evaluation.report import latency_summary
from llama_index_convrag.evaluation.retrieval import (DEFAULT_METRICS, RetrievalMetrics, RetrieveFn, as_ranked,
                                                       evaluate_run, metric_names, ranked_to_run_entry)
from llama_index_convrag.conversational.retriever import fuse_ranked
from llama_index_convrag.retrievers.fusion import weighted

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

RewriteFn = Callable[[Sequence[ConversationTurn], str], Any]  # -> query, [(query, weight), ...] or FusedQueries
TurnRecord = Mapping[str, Any]

RAW = "raw"
MANUAL = "manual"
_RESERVED = (RAW, MANUAL)


def raw_utterance(history: Sequence[ConversationTurn], utterance: str) -> str:
    """The baseline: the utterance as the user typed it."""
    return utterance


def concat_history(window: int = 3) -> RewriteFn:
    """A rewrite-free baseline: the last ``window`` earlier utterances, then the current one, space-joined."""
    if window < 1:
        raise ConfigurationError(f"window must be >= 1, got {window!r}")

    def rewrite(history: Sequence[ConversationTurn], utterance: str) -> str:
        return " ".join([*(t.utterance for t in history[-window:]), utterance])

    rewrite.__name__ = f"concat_history_{window}"
    return rewrite


@dataclass(frozen=True)
class FusedQueries:
    """Several searches and the function that fuses their ranked ``(doc_id, score)`` lists (the last query is the
    one reported); ``retrieve`` searches them when given (e.g. deeper than the replay's own retriever)."""

    queries: Tuple[str, ...]
    fuse: Callable[[List[List[Tuple[str, float]]]], List[Tuple[str, float]]]
    retrieve: Optional[RetrieveFn] = None


def contextual_strategy(fuse: bool = True, texts: Optional[Mapping[str, str]] = None,
                        retrieve: Optional[RetrieveFn] = None) -> RewriteFn:
    """The LLM-free ``contextual`` strategy; with ``fuse`` a plan ``[(question, w), (expanded, w)]`` whose two
    result lists are fused by weighted min-max fusion, as :class:`ConversationalRetriever` does. With ``texts``
    (doc id -> text) the two lists are fused exactly as the retriever does (:func:`fuse_ranked`: the expanded list's
    weight read off the question's own results and the two lists' agreement, its on-topic first result kept first),
    searched by ``retrieve`` when given (the retriever fuses ``FUSION_DEPTH``-deep lists, see
    :mod:`~llama_index_convrag.conversational.retriever`: pass a search that deep to score what it returns); without
    ``texts``, with the contextualiser's prior weights."""
    def rewrite(history: Sequence[ConversationTurn], utterance: str) -> Any:
        plan = contextualize(utterance, [HistoryTurn(t.utterance, t.answer or "") for t in history])
        if not fuse or not plan.added:
            return plan.query
        if texts is None:
            return [(plan.question, plan.question_weight), (plan.query, plan.context_weight)]

        def fuse_two(lists: List[List[Tuple[str, float]]]) -> List[Tuple[str, float]]:
            fused, _ = fuse_ranked(lists[0], lists[1], plan, lambda doc_id: texts.get(str(doc_id), ""))
            return [(str(d), float(sc)) for d, sc in fused]

        return FusedQueries((plan.question, plan.query), fuse_two, retrieve)

    rewrite.__name__ = "contextual_fused" if fuse else "contextual"
    return rewrite


def _run_query(query: Any, retrieve_fn: RetrieveFn, turn_id: str) -> Tuple[str, List[Tuple[str, float]]]:
    """Retrieve a query string, or fuse the lists of a ``[(query, weight), ...]`` plan."""
    if isinstance(query, str):
        return query, as_ranked(turn_id, retrieve_fn(query))
    if isinstance(query, FusedQueries):
        search = query.retrieve if query.retrieve is not None else retrieve_fn
        return query.queries[-1], query.fuse([as_ranked(turn_id, search(q)) for q in query.queries])
    plan = list(query)
    if not plan or not all(isinstance(q, str) for q, _ in plan):
        raise ArgumentTypeError(f"a strategy returns a query string or [(query, weight), ...], got {query!r}")
    lists = [as_ranked(turn_id, retrieve_fn(q)) for q, _ in plan]
    return plan[-1][0], [(str(d), float(sc)) for d, sc in weighted(lists, [float(w) for _, w in plan])]


@dataclass
class ScoredTurn:
    """What one strategy sent and got back for one turn."""

    turn_id: str
    dialogue_id: str
    position: int
    query: str
    retrieved: List[Tuple[str, float]]
    rewrite_latency_s: Optional[float] = None
    retrieve_latency_s: Optional[float] = None

    def top_ids(self, k: int) -> List[str]:
        return [doc_id for doc_id, _ in self.retrieved[:k]]


@dataclass
class StrategyResult:
    """Per-turn outcomes of one strategy with its retrieval metrics and rewrite similarity to the human one."""

    name: str
    outcomes: Dict[str, ScoredTurn]
    metrics: Optional[RetrievalMetrics]
    rewrite_scores: Dict[str, Dict[str, float]] = field(default_factory=dict)

    @property
    def means(self) -> Dict[str, float]:
        means = dict(self.metrics.means) if self.metrics is not None else {}
        if self.rewrite_scores:
            n = len(self.rewrite_scores)
            for key in ("rewrite_f1", "rewrite_em"):
                means[key] = sum(s[key] for s in self.rewrite_scores.values()) / n
        return means

    def per_position(self, metric: str) -> Dict[int, float]:
        """Mean of ``metric`` (a retrieval metric or ``rewrite_f1``) by turn position (1 = first turn)."""
        sums: Dict[int, List[float]] = {}
        for turn_id, outcome in self.outcomes.items():
            scores = (self.metrics.per_query.get(turn_id, {}) if self.metrics is not None else {})
            value = scores.get(metric, self.rewrite_scores.get(turn_id, {}).get(metric))
            if value is not None:
                sums.setdefault(outcome.position, []).append(value)
        if not sums:
            raise ConfigurationError(f"metric {metric!r} was not computed for strategy {self.name!r}")
        return {pos: sum(v) / len(v) for pos, v in sorted(sums.items())}

    def latencies(self) -> Dict[str, Dict[str, float]]:
        rewrite = [o.rewrite_latency_s for o in self.outcomes.values() if o.rewrite_latency_s is not None]
        retrieve = [o.retrieve_latency_s for o in self.outcomes.values() if o.retrieve_latency_s is not None]
        return {"rewrite": latency_summary(rewrite), "retrieve": latency_summary(retrieve)}

    def to_dict(self, top_n: int = 10) -> Dict[str, Any]:
        latency = self.latencies()
        return {
            "metrics": self.means,
            "latency": latency["retrieve"],
            "rewrite_latency": latency["rewrite"],
            "per_query": {
                turn_id: {
                    "dialogue_id": o.dialogue_id,
                    "position": o.position,
                    "query": o.query,
                    "metrics": {**(self.metrics.per_query.get(turn_id, {}) if self.metrics else {}),
                                **self.rewrite_scores.get(turn_id, {})},
                    "top_ids": o.top_ids(top_n),
                }
                for turn_id, o in self.outcomes.items()
            },
        }


@dataclass
class RewriteEffect:
    """How a strategy's top-k differs from the raw utterance's, and whether the change helped.

    ``changed``: turns whose ordered top-k id list differs from raw's; of those, ``improved``/``worsened``
    count a higher/lower nDCG@k, ``tied`` an equal one.
    """

    k: int
    turns: int
    changed: int
    improved: int
    worsened: int
    tied: int
    mean_delta_ndcg: float

    @property
    def changed_fraction(self) -> float:
        return self.changed / self.turns if self.turns else 0.0

    def to_dict(self) -> Dict[str, Any]:
        share = (lambda n: n / self.changed if self.changed else 0.0)
        return {
            "k": self.k, "turns": self.turns, "changed": self.changed,
            "changed_fraction": self.changed_fraction,
            "improved": self.improved, "worsened": self.worsened, "tied": self.tied,
            "improved_fraction_of_changed": share(self.improved),
            "worsened_fraction_of_changed": share(self.worsened),
            "mean_delta_ndcg": self.mean_delta_ndcg,
        }


def rewrite_effect(baseline: StrategyResult, other: StrategyResult, k: int, *, eps: float = 1e-9) -> RewriteEffect:
    """Compare ``other`` with ``baseline`` turn by turn on top-k lists and nDCG@k."""
    if baseline.metrics is None or other.metrics is None:
        raise ConfigurationError("rewrite_effect needs retrieval metrics on both strategies")
    key = f"ndcg@{k}"
    if key not in baseline.metrics.means:
        raise ConfigurationError(f"{key} was not computed; computed: {sorted(baseline.metrics.means)}")
    changed = improved = worsened = tied = 0
    deltas = []
    shared = [t for t in baseline.outcomes if t in other.outcomes and t in baseline.metrics.per_query]
    for turn_id in shared:
        delta = other.metrics.per_query[turn_id][key] - baseline.metrics.per_query[turn_id][key]
        deltas.append(delta)
        if other.outcomes[turn_id].top_ids(k) == baseline.outcomes[turn_id].top_ids(k):
            continue
        changed += 1
        if delta > eps:
            improved += 1
        elif delta < -eps:
            worsened += 1
        else:
            tied += 1
    return RewriteEffect(k=k, turns=len(shared), changed=changed, improved=improved, worsened=worsened,
                         tied=tied, mean_delta_ndcg=sum(deltas) / len(deltas) if deltas else 0.0)


@dataclass
class ConversationResult:
    """Every strategy's result and each non-raw strategy's rewrite effect against raw."""

    strategies: Dict[str, StrategyResult]
    effects: Dict[str, RewriteEffect]
    ks: Tuple[int, ...]
    effect_k: Optional[int]

    def results_for_report(self) -> Dict[str, Any]:
        """``{strategy: dict}`` for :func:`build_report`, each with its rewrite effect where one exists."""
        out = {}
        for name, result in self.strategies.items():
            entry = result.to_dict()
            if name in self.effects:
                entry["rewrite_effect"] = self.effects[name].to_dict()
            out[name] = entry
        return out

    def summary(self, metric: str = "ndcg@10", *, eps: float = 1e-9) -> Dict[str, Dict[str, float]]:
        """Per strategy: its metric means, ``gap_closed`` (share of the raw -> manual gap on ``metric``; needs
        ``manual``), and over follow-ups (turns after the first) how many fell below / rose above raw on ``metric``."""
        raw = self.strategies[RAW]
        if raw.metrics is None or metric not in raw.metrics.means:
            raise ConfigurationError(f"{metric} was not computed; computed: "
                             f"{sorted(raw.metrics.means) if raw.metrics is not None else []}")
        manual = self.strategies.get(MANUAL)
        gap = manual.metrics.means[metric] - raw.metrics.means[metric] if manual is not None else None
        follow = [t for t, o in raw.outcomes.items() if o.position > 1 and t in raw.metrics.per_query]
        out = {}
        for name, result in self.strategies.items():
            scores = result.metrics.per_query  # type: ignore[union-attr]
            row: Dict[str, float] = dict(result.metrics.means)  # type: ignore[union-attr]
            delta = [scores[t][metric] - raw.metrics.per_query[t][metric] for t in follow if t in scores]
            row.update({"followups": len(delta), "worse": sum(d < -eps for d in delta),
                        "better": sum(d > eps for d in delta)})
            if gap:
                row["gap_closed"] = (row[metric] - raw.metrics.means[metric]) / gap
            out[name] = row
        return out

    def per_position(self, metric: str) -> Dict[str, Dict[int, float]]:
        """Per-turn curves for every strategy, ready for :func:`plots.plot_turn_curves`."""
        return {name: result.per_position(metric) for name, result in self.strategies.items()}


def _validate_strategies(strategies: Mapping[str, RewriteFn], records: Mapping[str, Any]) -> None:
    clash = sorted({*strategies, *records} & set(_RESERVED))
    if clash:
        raise ConfigurationError(f"strategy names {list(_RESERVED)} are built in; rename {clash}")
    both = sorted(set(strategies) & set(records))
    if both:
        raise ConfigurationError(f"names used both as a strategy and as records: {both}")
    bad = [name for name, fn in strategies.items() if not callable(fn)]
    if bad:
        raise ArgumentTypeError(f"strategies must be callables (history_turns, utterance) -> query; not callable: {bad}")


def _record_outcome(turn: ConversationTurn, record: TurnRecord, name: str) -> ScoredTurn:
    missing = [key for key in ("original_question", "retrieval_query", "retrieved_ids") if key not in record]
    if missing:
        raise ConfigurationError(f"{name!r} record for turn {turn.turn_id!r} lacks {missing}")
    if str(record["original_question"]).strip() != turn.utterance.strip():
        raise ConfigurationError(
            f"{name!r} record for turn {turn.turn_id!r} answers {record['original_question']!r}, "
            f"but the turn's utterance is {turn.utterance!r}; records are out of step with the data"
        )
    ids = record["retrieved_ids"]
    final = ids.get("final") if isinstance(ids, Mapping) else None
    if final is None:
        raise ConfigurationError(f"{name!r} record for turn {turn.turn_id!r}: retrieved_ids needs a 'final' list")
    n = len(final)
    return ScoredTurn(turn_id=turn.turn_id, dialogue_id=turn.dialogue_id, position=turn.position,
                       query=str(record["retrieval_query"]),
                       retrieved=[(str(doc_id), float(n - i)) for i, doc_id in enumerate(final)])


def collect_records(dialogues: Iterable[Dialogue],
                    run_dialogue: Callable[[Dialogue], Sequence[TurnRecord]]) -> Dict[str, TurnRecord]:
    """Call ``run_dialogue(dialogue) -> [record per turn]`` (e.g. reset a chat engine, chat every utterance,
    return its turn records) for each dialogue; returns ``{turn_id: record}``."""
    out: Dict[str, TurnRecord] = {}
    for dialogue in dialogues:
        records = list(run_dialogue(dialogue))
        if len(records) != len(dialogue.turns):
            raise ConfigurationError(f"dialogue {dialogue.dialogue_id!r} has {len(dialogue.turns)} turns but run_dialogue "
                             f"returned {len(records)} records")
        out.update({turn.turn_id: record for turn, record in zip(dialogue.turns, records)})
    return out


def strategy_from_records(dialogues: Iterable[Dialogue], records: Mapping[str, TurnRecord]) -> RewriteFn:
    """A strategy that replays a chat engine's logged ``retrieval_query`` (e.g. through another retriever).

    Queries are looked up by the dialogue so far (earlier utterances + this utterance), so the strategy
    isolates the engine's rewriting from its retrieval.
    """
    table: Dict[Tuple[Tuple[str, ...], str], str] = {}
    for dialogue in dialogues:
        for index, turn in enumerate(dialogue.turns):
            if turn.turn_id in records:
                outcome = _record_outcome(turn, {"retrieved_ids": {"final": []}, **records[turn.turn_id]}, "records")
                table[(tuple(t.utterance for t in dialogue.turns[:index]), turn.utterance)] = outcome.query

    def rewrite(history: Sequence[ConversationTurn], utterance: str) -> str:
        key = (tuple(t.utterance for t in history), utterance)
        if key not in table:
            raise RecordNotFoundError(f"no record for {utterance!r} after {len(history)} earlier turns")
        return table[key]

    return rewrite


def _rewrite_scores(outcomes: Mapping[str, ScoredTurn],
                    turns: Mapping[str, ConversationTurn]) -> Dict[str, Dict[str, float]]:
    return {
        turn_id: {"rewrite_f1": token_f1(o.query, turns[turn_id].rewrite),
                  "rewrite_em": exact_match(o.query, turns[turn_id].rewrite)}
        for turn_id, o in outcomes.items() if turns[turn_id].rewrite is not None
    }


_PlanFn = Callable[[Sequence[ConversationTurn], ConversationTurn], Optional[str]]


def _replay(dialogues: Sequence[Dialogue], turns: Mapping[str, ConversationTurn], plan: Mapping[str, _PlanFn],
            retrieve_fn: Optional[RetrieveFn]) -> Dict[str, Dict[str, ScoredTurn]]:
    """Turns in dialogue order, every plan entry per turn: build the query, then retrieve it (timed apart)."""
    outcomes: Dict[str, Dict[str, ScoredTurn]] = {name: {} for name in plan}
    for dialogue in dialogues:
        for index, turn in enumerate(dialogue.turns):
            if turn.turn_id not in turns:
                continue
            history = dialogue.turns[:index]
            for name, fn in plan.items():
                start = time.perf_counter()
                query = fn(history, turn)
                rewrite_s = time.perf_counter() - start
                if not isinstance(query, (str, list, tuple, FusedQueries)):
                    raise ArgumentTypeError(f"strategy {name!r} returned {type(query).__name__}, expected str, a "
                                    f"[(query, weight), ...] plan or FusedQueries")
                retrieved: List[Tuple[str, float]] = []
                retrieve_s = None
                if retrieve_fn is not None:
                    start = time.perf_counter()
                    query, retrieved = _run_query(query, retrieve_fn, turn.turn_id)
                    retrieve_s = time.perf_counter() - start
                elif not isinstance(query, str):
                    query = list(query)[-1][0]
                outcomes[name][turn.turn_id] = ScoredTurn(
                    turn_id=turn.turn_id, dialogue_id=turn.dialogue_id, position=turn.position, query=query,
                    retrieved=retrieved, rewrite_latency_s=None if name in _RESERVED else rewrite_s,
                    retrieve_latency_s=retrieve_s)
    return outcomes


@dispatcher.span
def replay_conversations(
    dialogues: Sequence[Dialogue],
    retrieve_fn: Optional[RetrieveFn],
    strategies: Optional[Mapping[str, RewriteFn]] = None,
    *,
    records: Optional[Mapping[str, Mapping[str, TurnRecord]]] = None,
    ks: Sequence[int] = (3, 10),
    metrics: Sequence[str] = DEFAULT_METRICS,
    effect_k: Optional[int] = None,
) -> ConversationResult:
    """Evaluate ``raw``, ``manual`` (when every turn has a human rewrite), each strategy and each record set.

    With ``retrieve_fn``, only turns with relevance judgments are replayed and scored (nDCG@k etc. through
    ranx, plus the rewrite effect at ``effect_k``, default ``max(ks)``). With ``retrieve_fn=None`` nothing is
    retrieved: every turn with a human rewrite is replayed and strategies are scored only by how close their
    query is to the human rewrite (``rewrite_f1``/``rewrite_em``), which is what CANARD supports.
    ``records`` maps a name to ``{turn_id: chat-engine turn record}``; the record's ``retrieval_query`` and
    ``retrieved_ids["final"]`` are scored as they are.
    """
    strategies = {} if strategies is None else dict(strategies)
    records = {} if records is None else dict(records)
    _validate_strategies(strategies, records)
    if retrieve_fn is not None:
        metric_names(metrics, ks)
        effect_k = max(ks) if effect_k is None else effect_k
        if effect_k not in ks or "ndcg" not in metrics:
            raise ConfigurationError(f"effect_k must be one of ks={list(ks)} with 'ndcg' among metrics, got {effect_k!r}")
    turns = {t.turn_id: t for d in dialogues for t in d.turns
             if (t.relevant if retrieve_fn is not None else t.rewrite is not None)}
    if not turns:
        raise ConfigurationError("no turn to replay: " + ("none has relevance judgments" if retrieve_fn is not None
                                                   else "none has a human rewrite"))
    # Every plan entry maps (history, turn) -> query; only "manual" may read the turn's human rewrite.
    plan: Dict[str, _PlanFn] = {
        RAW: lambda history, turn: raw_utterance(history, turn.utterance)}
    if all(t.rewrite is not None for t in turns.values()):
        plan[MANUAL] = lambda history, turn: turn.rewrite
    for name, fn in strategies.items():
        plan[name] = lambda history, turn, fn=fn: fn(history, turn.utterance)

    outcomes = _replay(dialogues, turns, plan, retrieve_fn)
    for name, by_turn in records.items():
        missing = [t for t in turns if t not in by_turn]
        if missing:
            raise ConfigurationError(f"records {name!r} lack {len(missing)} replayed turns, e.g. {missing[:3]}")
        outcomes[name] = {t: _record_outcome(turns[t], by_turn[t], name) for t in turns}

    results: Dict[str, StrategyResult] = {}
    for name, by_turn in outcomes.items():
        scored = None
        if retrieve_fn is not None:
            run = {t: ranked_to_run_entry(o.retrieved) for t, o in by_turn.items()}
            scored = evaluate_run(run, {t: dict(turns[t].relevant) for t in by_turn}, ks=ks, metrics=metrics)
        results[name] = StrategyResult(name=name, outcomes=by_turn, metrics=scored,
                                       rewrite_scores=_rewrite_scores(by_turn, turns))
    effects = {}
    if retrieve_fn is not None:
        effects = {name: rewrite_effect(results[RAW], result, effect_k)
                   for name, result in results.items() if name != RAW}
    return ConversationResult(strategies=results, effects=effects, ks=tuple(ks),
                              effect_k=effect_k if retrieve_fn is not None else None)
