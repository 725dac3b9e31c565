"""Conversational retrieval without an LLM: raw follow-up vs contextualised strategies vs the human rewrite.

For each set (CAsT 2021 passages, CAsT 2022 responses, CANARD dev answers; see ``bench/_conv_data.py``) and each
chunking (256-token chunks, and 700 tokens: the ingest default before chunks were sized to the window), the corpus is chunked with LlamaIndex's SentenceSplitter,
embedded once with the local MiniLM (cached in ``bench/out``) and searched in Python like the product's hybrid
retriever without its dense feedback search: dense cosine top-100 and BM25 top-100 (Milvus' ``english`` analyzer emulated: standard tokens,
lower case, Lucene stop words, Snowball stemmer; k1=1.2, b=0.75), min-max normalised weighted fusion 0.5/0.5 over
chunks, a document's score is its best chunk's.

``ctx-fuse`` fuses the top ``FUSION_DEPTH`` (50) of each list, as ``ConversationalRetriever`` does: the expanded list's
weight is the contextualiser's, scaled by the coverage of the added terms in the question's own top 10 (here the
documents' texts; the retriever reads its nodes' texts). Per strategy: hit@5, nDCG@10, Recall@100 over judged turns,
the share of the raw -> human gap closed (nDCG@10), the follow-ups whose nDCG@10 fell below raw's ("worse"), the
rewrite's p50 ms and the fusion step's p50 ms (coverage, weights, fusion of the two lists). ``--split dev|test|all`` takes even / odd dialogues.

``--agreement-grid`` runs ``ctx-fuse`` over :data:`AGREEMENT_GRID`, settings of the lists' agreement factor
(:class:`ContextRules` ``agreement_slope`` / ``agreement_pivot``), the first row without it.

``--weight-oracle`` scales the expanded list's weight by each of :data:`ORACLE_SCALES` and adds the per-follow-up
best scale chosen from the gold labels: the most any weighting of these two lists could close (an analysis).

``--term-rules`` runs ``ctx-fuse`` with the repeated-name and named-shift rules of ``contextualize`` off, or set
otherwise (:data:`TERM_RULES`, each a :class:`ContextRules` value).

``--followups`` runs ``ctx-fuse`` with the follow-up rules of ``conversational.contextualize`` (the name the last
answer introduced, list items, the topic switch; :data:`FOLLOWUP_RULES`) off and on, on all dialogues and on each half,
then the Chinese rewrite set's agreement with the human rewrites and the written dialogues of ``bench._conv_data``.

``--conversation-words`` runs ``ctx-fuse`` with ``ContextRules.conversation_words`` (words of talk, not of a topic,
beyond NLTK's stop lists) on and off, on all dialogues and each half, then the Chinese rewrite set's agreement.

``--variants`` compares the local model's ``fp32`` and ``int8`` variants on the follow-ups (raw, ``ctx-fuse`` and the
human rewrite), paired turn by turn, on all dialogues and each half; ``--keep-float L1,L2`` adds an int8 copy keeping
those layers in float (repeatable), to compare recipes.

``--shift-answers`` runs ``ctx-fuse`` with the topic-shift check counting a follow-up's terms against every earlier
answer or the last one only (:data:`SHIFT_ANSWER_ROWS`), on all dialogues and on each half.

``--shown-answers`` runs ``ctx-fuse`` with the history's answers left out, the gold ones (as everywhere else here) or
the system's own extractive answers (a retrieval-only session), with and without the repeated-name rule.

    PYTHONPATH=$PWD python bench/conversational_retrieval.py --sets cast21,cast22,canard --chunks 256,700
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._conv_data import ConvSet, EmbeddingCache, chunk_corpus, load_sets  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.conversational.contextualize import ContextRules
from llama_index_convrag.evaluation.datasets import ConversationTurn  # noqa: E402

log = logging.getLogger("bench")
LUCENE_STOP = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their then "
                        "there these they this to was will with".split())
_TOKEN = re.compile(r"\w+", re.UNICODE)
DEPTH = 100
CHUNKS = {256: 20, 700: 50}  # chunk size -> overlap (700/50 was the ingest default)


class Analyzer:
    def __init__(self) -> None:
        from nltk.stem.snowball import SnowballStemmer

        self.stem = SnowballStemmer("english").stem
        self.memo: Dict[str, str] = {}

    def __call__(self, text: str) -> List[str]:
        out = []
        for tok in _TOKEN.findall(text.lower()):
            if tok in LUCENE_STOP:
                continue
            s = self.memo.get(tok)
            if s is None:
                s = self.memo[tok] = self.stem(tok)
            out.append(s)
        return out


class Index:
    """One chunked corpus: dense matrix + BM25 postings; ``search`` returns fused document ids (cached)."""

    def __init__(self, corpus: Mapping[str, str], chunk_size: int, cache: EmbeddingCache, analyzer: Analyzer,
                 k1: float = 1.2, b: float = 0.75) -> None:
        self.corpus = dict(corpus)
        self.doc_of, texts = chunk_corpus(self.corpus, chunk_size, CHUNKS[chunk_size])
        self.cache = cache
        self.matrix = cache.embed(texts)
        self.analyzer = analyzer
        toks = [analyzer(t) for t in texts]
        lengths = np.array([len(t) for t in toks], dtype=np.float64)
        avg = lengths.mean() if len(lengths) else 1.0
        df: Dict[str, int] = {}
        for t in toks:
            for w in set(t):
                df[w] = df.get(w, 0) + 1
        n = len(toks)
        self.idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}
        self.postings: Dict[str, List[Tuple[int, float]]] = {}
        for i, t in enumerate(toks):
            tf: Dict[str, int] = {}
            for w in t:
                tf[w] = tf.get(w, 0) + 1
            norm = k1 * (1 - b + b * lengths[i] / avg)
            for w, f in tf.items():
                self.postings.setdefault(w, []).append((i, f * (k1 + 1) / (f + norm)))
        self.memo: Dict[str, List[Tuple[str, float]]] = {}

    def bm25(self, text: str) -> List[Tuple[int, float]]:
        scores: Dict[int, float] = {}
        for w in self.analyzer(text):  # Milvus counts a repeated query term once per occurrence too
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i, s in self.postings[w]:
                scores[i] = scores.get(i, 0.0) + idf * s
        return sorted(scores.items(), key=lambda kv: -kv[1])[:DEPTH]

    def dense(self, vec: np.ndarray) -> List[Tuple[int, float]]:
        sims = self.matrix @ vec
        top = np.argsort(-sims)[:DEPTH]
        return [(int(i), float(sims[i])) for i in top]

    def search(self, text: str, mode: str = "hybrid") -> List[Tuple[str, float]]:
        key = mode + "\0" + text
        if key in self.memo:
            return self.memo[key]
        from llama_index_convrag.retrievers.fusion import weighted

        lists = []
        if mode in ("hybrid", "dense"):
            lists.append(self.dense(self.cache.embed([text])[0]))
        if mode in ("hybrid", "sparse"):
            lists.append(self.bm25(text))
        fused = weighted(lists, [1.0 / len(lists)] * len(lists)) if len(lists) > 1 else lists[0]
        docs: Dict[str, float] = {}
        for chunk, score in fused:
            docs.setdefault(self.doc_of[chunk], score)
        out = list(docs.items())[:DEPTH]
        self.memo[key] = out
        return out


# ------------------------------------------------------------------------------------------------ strategies

Plan = List[Tuple[str, object]]  # (query, fusion weight or the Contextualized plan); one entry = one search
Strategy = Callable[[Sequence[ConversationTurn], ConversationTurn], Plan]


def history_of(turns: Sequence[ConversationTurn]):
    from llama_index_convrag.conversational.contextualize import HistoryTurn

    return [HistoryTurn(t.utterance, t.answer or "") for t in turns]


def s_raw(history, turn) -> Plan:
    return [(turn.utterance, 1.0)]


def s_manual(history, turn) -> Plan:
    return [(turn.rewrite or turn.utterance, 1.0)]


def s_concat(history, turn) -> Plan:
    """The engine's concat: the last 3 user turns + the question, when the trigger says it needs context."""
    from llama_index_convrag.conversational.triggers import needs_rewrite

    if not history or not needs_rewrite(turn.utterance).rewrite:
        return [(turn.utterance, 1.0)]
    return [("\n".join([*(t.utterance for t in history[-3:]), turn.utterance]), 1.0)]


def make_ctx(fuse: bool, repeat: int = 1, rules: Optional["ContextRules"] = None) -> Strategy:
    from llama_index_convrag.conversational.contextualize import DEFAULT_RULES, contextualize

    given = rules if rules is not None else DEFAULT_RULES

    def strategy(history, turn) -> Plan:
        c = contextualize(turn.utterance, history_of(history), given)
        if c.query == c.question:
            return [(c.question, 1.0)]
        query = c.query if repeat == 1 else " ".join([c.question] * (repeat - 1) + [c.query])
        if not fuse:
            return [(query, 1.0)]
        return [(c.question, c.question_weight), (query, c)]  # weight set by the question's results (coverage)

    return strategy


FUSION = {"method": "minmax", "k": 60.0}  # minmax: weighted normalised fusion of the two lists (measured best)


def run_plan(index: Index, plan: Plan, mode: str, weigh_ms: Optional[List[float]] = None) -> List[str]:
    if len(plan) == 1:
        return [d for d, _ in index.search(plan[0][0], mode)]
    from llama_index_convrag.retrievers.fusion import weighted

    from llama_index_convrag.conversational.retriever import FUSION_DEPTH

    lists = [index.search(q, mode)[:FUSION_DEPTH] for q, _ in plan]  # the depth ConversationalRetriever fuses at
    if not isinstance(plan[1][1], float):  # a Contextualized plan: fused exactly as ConversationalRetriever does
        from llama_index_convrag.conversational.retriever import fuse_ranked

        t0 = time.perf_counter()
        fused, _ = fuse_ranked(lists[0], lists[1], plan[1][1], index.corpus.__getitem__)
        if weigh_ms is not None:
            weigh_ms.append((time.perf_counter() - t0) * 1000)
        return [d for d, _ in fused]
    weights = [float(w) for _, w in plan]
    if FUSION["method"] == "minmax":
        return [d for d, _ in weighted(lists, weights)]
    scores: Dict[str, float] = {}
    for w, ranked in zip(weights, lists):
        for rank, (d, _) in enumerate(ranked, start=1):
            scores[d] = scores.get(d, 0.0) + w / (FUSION["k"] + rank)
    return [d for d, _ in sorted(scores.items(), key=lambda kv: -kv[1])]


class WrappedPlan:
    """A Contextualized plan seen through a bench variant: every ``ContextPlan`` member (see
    ``retrievers.conversational``) delegates to ``c``; a variant overrides ``weight_given``."""

    def __init__(self, c) -> None:
        self.c = c
        self.question, self.query, self.added = c.question, c.query, c.added
        self.question_weight, self.context_weight, self.coverage_depth = (c.question_weight, c.context_weight,
                                                                          c.coverage_depth)

    def weight_given(self, own_results):
        return self.c.weight_given(own_results)

    def agreement_factor(self, agreed: float) -> float:
        return self.c.agreement_factor(agreed)

    def mentioned_in(self, text: str) -> bool:
        return self.c.mentioned_in(text)


# --------------------------------------------------------------------------------------------------- metrics

def turn_metrics(ranked: Sequence[str], relevant: Mapping[str, int]) -> Dict[str, float]:
    rel = {d for d, g in relevant.items() if g > 0}
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in rel)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(rel), 10)))
    return {"hit@5": float(any(d in rel for d in ranked[:5])), "ndcg@10": dcg / idcg if idcg else 0.0,
            "recall@100": len(rel & set(ranked[:100])) / len(rel) if rel else 0.0}


def turn_scores(s: ConvSet, index: Index, strategies: Mapping[str, Strategy], mode: str, split: str = "all"
                ) -> Tuple[Dict[str, Dict[str, Dict[str, float]]], set, Dict[str, List[float]], Dict[str, List[float]]]:
    """Per strategy ``{turn id: turn_metrics}`` over the judged turns of ``split`` (dev: even dialogues, test: odd),
    the ids of the follow-ups among them, and each strategy's rewrite and fusion-weight times (ms)."""
    per: Dict[str, Dict[str, Dict[str, float]]] = {n: {} for n in strategies}
    follow: set = set()
    rewrite_ms: Dict[str, List[float]] = {n: [] for n in strategies}
    weigh_ms: Dict[str, List[float]] = {n: [] for n in strategies}  # fusion weight from the own results (coverage)
    plans: List[Tuple[str, ConversationTurn, Plan]] = []
    for di, d in enumerate(s.dialogues):
        if (split == "dev" and di % 2) or (split == "test" and not di % 2):
            continue
        for i, turn in enumerate(d.turns):
            if not turn.relevant:
                continue
            history = d.turns[:i]
            if history:
                follow.add(turn.turn_id)
            for name, fn in strategies.items():
                t0 = time.perf_counter()
                plan = fn(history, turn)
                rewrite_ms[name].append((time.perf_counter() - t0) * 1000)
                plans.append((name, turn, plan))
    if mode != "sparse":  # embed every new query string in one batch
        index.cache.embed([q for _, _, plan in plans for q, _ in plan])
    for name, turn, plan in plans:
        per[name][turn.turn_id] = turn_metrics(run_plan(index, plan, mode, weigh_ms[name]), turn.relevant)
    return per, follow, rewrite_ms, weigh_ms


def evaluate(s: ConvSet, index: Index, strategies: Mapping[str, Strategy], mode: str, split: str,
             halves: bool = False) -> Dict[str, Dict[str, float]]:
    """Per strategy: the main table's row, with ``dev`` / ``test`` parts (even / odd dialogues) for ``split`` all,
    and with ``halves`` ``first`` / ``second`` parts (the first and the second half of the dialogues)."""
    per, follow, rewrite_ms, weigh_ms = turn_scores(s, index, strategies, mode, split)
    dialogue_of = {t.turn_id: di for di, d in enumerate(s.dialogues) for t in d.turns}
    out = summarise(per, follow, rewrite_ms, weigh_ms)
    half = len(s.dialogues) // 2
    parts = [("dev", lambda di: di % 2 == 0), ("test", lambda di: di % 2 == 1)]
    if halves:
        parts += [("first", lambda di: di < half), ("second", lambda di: di >= half)]
    for part, inside in parts:
        keep = {t for t in per["raw"] if inside(dialogue_of[t])}
        if split == "all" and keep:
            sub = summarise({n: {t: v for t, v in sc.items() if t in keep} for n, sc in per.items()}, follow & keep,
                            rewrite_ms, weigh_ms)
            for name, row in sub.items():
                out[name][part] = {k: row[k] for k in ("ndcg@10", "gap_closed_ndcg@10", "worse", "followups")}
    return out


def summarise(per, follow, rewrite_ms, weigh_ms) -> Dict[str, Dict[str, float]]:
    raw, manual = per["raw"], per.get("manual")
    out = {}
    for name, scores in per.items():
        row = {m: float(np.mean([v[m] for v in scores.values()])) for m in ("hit@5", "ndcg@10", "recall@100")}
        row["turns"] = len(scores)
        row["followups"] = len(follow)
        row["worse"] = sum(1 for t in follow if scores[t]["ndcg@10"] < raw[t]["ndcg@10"] - 1e-9)
        row["better"] = sum(1 for t in follow if scores[t]["ndcg@10"] > raw[t]["ndcg@10"] + 1e-9)
        if manual is not None:  # worse follow-ups where the human rewrite does no better than raw either
            row["worse_human_no_better"] = sum(1 for t in follow if scores[t]["ndcg@10"] < raw[t]["ndcg@10"] - 1e-9
                                               and manual[t]["ndcg@10"] <= raw[t]["ndcg@10"] + 1e-9)
        if manual is not None:
            for m in ("ndcg@10", "hit@5"):
                gap = np.mean([v[m] for v in manual.values()]) - np.mean([v[m] for v in raw.values()])
                row[f"gap_closed_{m}"] = float((row[m] - np.mean([v[m] for v in raw.values()])) / gap) if gap else 0.0
        row["rewrite_ms_p50"] = float(np.percentile(rewrite_ms[name], 50)) if rewrite_ms.get(name) else 0.0
        row["rewrite_ms_max"] = float(np.max(rewrite_ms[name])) if rewrite_ms.get(name) else 0.0
        row["weigh_ms_p50"] = float(np.percentile(weigh_ms[name], 50)) if weigh_ms.get(name) else 0.0
        row["weigh_ms_p95"] = float(np.percentile(weigh_ms[name], 95)) if weigh_ms.get(name) else 0.0
        out[name] = row
    return out


def strategies_default() -> Dict[str, Strategy]:
    return {"raw": s_raw, "manual": s_manual, "concat": s_concat,
            "ctx-expand": make_ctx(False), "ctx-fuse": make_ctx(True)}


def print_table(name: str, chunk: int, rows: Mapping[str, Mapping[str, float]]) -> None:
    print(f"\n{name} chunk={chunk}: {next(iter(rows.values()))['turns']} judged turns, "
          f"{next(iter(rows.values()))['followups']} follow-ups")
    print(f"{'strategy':<27} {'hit@5':>6} {'nDCG@10':>7} {'R@100':>6} {'gap%':>6} {'worse':>5} {'better':>6} {'ms':>5} "
          f"{'fuse ms':>7}  dev gap/worse%  test gap/worse%")
    for s, r in rows.items():
        gap = r.get("gap_closed_ndcg@10")
        parts = "".join(f"  {100 * r[p]['gap_closed_ndcg@10']:5.0f}% {100 * r[p]['worse'] / max(r[p]['followups'], 1):5.1f}%"
                        "     " for p in ("dev", "test") if p in r and "gap_closed_ndcg@10" in r[p])
        print(f"{s:<27} {r['hit@5']:6.3f} {r['ndcg@10']:7.3f} {r['recall@100']:6.3f} "
              f"{(f'{100 * gap:5.0f}%' if gap is not None else '    -'):>6} {r['worse']:5d} {r['better']:6d} "
              f"{r['rewrite_ms_p50']:5.2f} {r['weigh_ms_p50']:7.2f}{parts}")
    if "ctx-fuse" in rows and "worse_human_no_better" in rows["ctx-fuse"]:
        print(f"ctx-fuse: {rows['ctx-fuse']['worse_human_no_better']} of its {rows['ctx-fuse']['worse']} worse "
              f"follow-ups are ones the human rewrite does no better on than raw")


def zh_term_recall(rows: int) -> Dict[str, float]:
    """Chinese (no corpus: term level): how often ``contextual`` appends a term the human rewrite inserted."""
    from bench._data import shared_data
    from llama_index_convrag.conversational.contextualize import HistoryTurn, contextualize

    n = added = recovered = good = total = 0
    with open(shared_data() / "zh_utterance_rewrite" / "rewrite.jsonl", encoding="utf-8") as f:
        for line in f:
            if n >= rows:
                break
            r = json.loads(line)
            c = contextualize(r["utterance"], [HistoryTurn(r["context"][0], r["context"][1])])
            hits = [a.term for a in c.added if a.term in r["rewrite"] and a.term not in r["utterance"]]
            n, added, recovered = n + 1, added + bool(c.added), recovered + bool(hits)
            good, total = good + len(hits), total + len(c.added)
    return {"rows": n, "with_added_terms": added / n, "human_term_recovered": recovered / n,
            "added_term_precision": good / total if total else 0.0}


WEIGHT_GRID = [  # (context_scale, max_context_weight, named_subject_weight, UNCOVERED_FACTOR, COVERED_FACTOR)
    (2.0, 3.0, 0.3, 2.0, 0.25), (3.0, 3.0, 0.3, 2.0, 0.25), (2.0, 5.0, 0.3, 2.0, 0.25), (2.0, 3.0, 0.6, 2.0, 0.25),
    (2.0, 3.0, 0.3, 3.0, 0.25), (2.0, 3.0, 0.3, 2.0, 0.5), (3.0, 4.0, 0.5, 2.0, 0.25), (2.0, 3.0, 0.3, 2.5, 0.35)]
"""``--weights-grid``: the first row is the default; each row runs ``ctx-fuse`` with those weights."""


def weights_grid(sets: Mapping[str, ConvSet], chunk: int, cache: "EmbeddingCache", analyzer: "Analyzer",
                 mode: str) -> None:
    """Print ``ctx-fuse``'s gap closed and worse share per set for each row of :data:`WEIGHT_GRID`."""
    from llama_index_convrag.conversational.contextualize import ContextRules

    indexes = {name: Index(s.corpus, chunk, cache, analyzer) for name, s in sets.items()}
    print(f"chunk={chunk}: scale cap named uncovered covered | per set: gap closed, follow-ups worse")
    for scale, cap, named, uncovered, covered in WEIGHT_GRID:
        fuse = make_ctx(True, rules=ContextRules(context_scale=scale, max_context_weight=cap,
                                                 named_subject_weight=named, uncovered_factor=uncovered,
                                                 covered_factor=covered))
        cells = []
        for name, s in sets.items():
            row = evaluate(s, indexes[name], {"raw": s_raw, "manual": s_manual, "f": fuse}, mode, "all")["f"]
            cells.append(f"{name} {100 * row['gap_closed_ndcg@10']:.0f}% / {100 * row['worse'] / row['followups']:.1f}%")
        print(f"{scale} {cap} {named} {uncovered} {covered} | " + " | ".join(cells), flush=True)


AGREEMENT_GRID = [(0.0, 0.4), (4.0, 0.4), (3.0, 0.4), (5.0, 0.4), (4.0, 0.35), (4.0, 0.45), (4.0, 0.5)]
"""``--agreement-grid`` rows (AGREEMENT_SLOPE, AGREEMENT_PIVOT): the first turns the agreement factor off (always 1),
the second is the default; each row runs ``ctx-fuse`` at every chunk size asked."""


def rule_rows(title: str, rows: Mapping[str, Mapping[str, float]], sets: Mapping[str, ConvSet], chunks: Sequence[int],
              cache: "EmbeddingCache", analyzer: "Analyzer", mode: str, halves: bool = False) -> None:
    """Print ``ctx-fuse``'s gap closed and worse share per set and chunk size for each row: a label and the
    :class:`ContextRules` fields it sets (the rest default); with ``halves`` also on each half of the dialogues."""
    from llama_index_convrag.conversational.contextualize import ContextRules

    indexes = {(name, chunk): Index(s.corpus, chunk, cache, analyzer) for name, s in sets.items() for chunk in chunks}
    print(f"{title} | per set and chunk: gap closed, follow-ups worse" +
          (" (all; first half; second half)" if halves else ""))
    for label, fields in rows.items():
        fuse = make_ctx(True, rules=ContextRules(**fields))
        cells = []
        for (name, chunk), index in indexes.items():
            got = evaluate(sets[name], index, {"raw": s_raw, "manual": s_manual, "f": fuse}, mode, "all", halves)["f"]
            cells.append(f"{name}/{chunk} " + "; ".join(
                f"{100 * p['gap_closed_ndcg@10']:.0f}% / {100 * p['worse'] / max(p['followups'], 1):.1f}%"
                for p in [got] + ([got["first"], got["second"]] if halves else [])))
        print(f"{label} | " + " | ".join(cells), flush=True)


def agreement_grid(sets: Mapping[str, ConvSet], chunks: Sequence[int], cache: "EmbeddingCache", analyzer: "Analyzer",
                   mode: str) -> None:
    """:func:`rule_rows` for each row of :data:`AGREEMENT_GRID`."""
    rows = {f"{slope} {pivot}": {"agreement_slope": slope, "agreement_pivot": pivot} for slope, pivot in AGREEMENT_GRID}
    rule_rows("slope pivot", rows, sets, chunks, cache, analyzer, mode)


def ndcg_of(index: Index, plan: Plan, mode: str, relevant: Mapping[str, int]) -> float:
    """One turn's nDCG@10 for ``plan``."""
    return turn_metrics(run_plan(index, plan, mode), relevant)["ndcg@10"]


def gap_and_worse(got: Sequence[float], raw: Sequence[float], manual: Sequence[float], follow: Sequence[bool]) -> str:
    """``"G% / W%"``: the share of the raw -> manual nDCG@10 gap ``got`` closes over all judged turns, and the share of
    follow-ups (``follow``) it scores below raw, as the main table counts them."""
    base, fu = np.array(raw), np.array(follow)
    return (f"{100 * (np.mean(got) - base.mean()) / (np.mean(manual) - base.mean()):.0f}% / "
            f"{100 * np.mean((np.array(got) < base - 1e-9)[fu]):.1f}%")


def judged_baselines(index: Index, s: ConvSet, mode: str) -> Tuple[List[float], List[float], List[bool]]:
    """raw and manual nDCG@10 of every judged turn in dialogue order, and whether each is a follow-up."""
    raw, manual, follow = [], [], []
    for d in s.dialogues:
        for i, turn in enumerate(d.turns):
            if turn.relevant:
                raw.append(ndcg_of(index, s_raw(d.turns[:i], turn), mode, turn.relevant))
                manual.append(ndcg_of(index, s_manual(d.turns[:i], turn), mode, turn.relevant))
                follow.append(i > 0)
    return raw, manual, follow


TERM_RULES: Dict[str, Dict[str, float]] = {
    "default": {}, "repeated names off": {"answer_repeat_cap": 1}, "named shifts off": {"shift_min_terms": 0},
    "both off": {"answer_repeat_cap": 1, "shift_min_terms": 0}, "repeat cap 2": {"answer_repeat_cap": 2},
    "repeat cap 5": {"answer_repeat_cap": 5}, "shift at 4 words": {"shift_min_terms": 4},
    "shift at 5 words": {"shift_min_terms": 5}, "shift by names only": {"shift_min_terms": 99},
}
"""``--term-rules`` rows: the repeated-name and named-shift rules of ``contextualize`` switched off or set otherwise,
each a :class:`ContextRules` value."""


def term_rules(sets: Mapping[str, ConvSet], chunks: Sequence[int], cache: "EmbeddingCache", analyzer: "Analyzer",
               mode: str) -> None:
    """:func:`rule_rows` for each row of :data:`TERM_RULES`."""
    rule_rows("term rules", TERM_RULES, sets, chunks, cache, analyzer, mode)


FOLLOWUP_RULES: Dict[str, Dict[str, float]] = {
    "rules off": {"answer_subject_weight": 0.0, "list_item_weight": 0.0},
    "answer subject only": {"list_item_weight": 0.0}, "list items only": {"answer_subject_weight": 0.0},
    "default (both)": {}, "default + switch": {"referent_shift": True},
}
"""``--followups`` rows: the follow-up rules of ``contextualize`` off, each alone, both (the default), and with the
topic switch the answer's subject announces (rejected). ``answer_subject_weight`` 1: the answer's name weighs as a
term of the last question; ``list_item_weight`` 2: the item outranks the last question's words."""


def followups(sets: Mapping[str, ConvSet], chunks: Sequence[int], cache: "EmbeddingCache", analyzer: "Analyzer",
              mode: str) -> None:
    """Print, for each :data:`FOLLOWUP_RULES` row: ``ctx-fuse``'s gap closed and worse share per set and chunk on all
    dialogues and on each half; the Chinese rewrite set's agreement with the human rewrite per half (:func:`zh_agreement`);
    and how many written dialogues of each rule (``bench._conv_data.HAND_MADE``) get their expected words."""
    from bench._conv_data import HAND_MADE
    from llama_index_convrag.conversational.contextualize import HistoryTurn, contextualize

    from llama_index_convrag.conversational.contextualize import ContextRules

    if sets:
        rule_rows("follow-up rules", FOLLOWUP_RULES, sets, chunks, cache, analyzer, mode, halves=True)
    rows = {label: ContextRules(**fields) for label, fields in FOLLOWUP_RULES.items()}
    print(f"\nzh_utterance_rewrite ({ZH_ROWS} rows; halves of {ZH_ROWS // 2}): human-added characters recovered / "
          f"rows with only wrong additions (all; first half; second half)")
    for row, rules in rows.items():
        print(f"{row} | " + "; ".join(f"{100 * r:.1f}% / {100 * w:.1f}%" for r, w in zh_agreement(ZH_ROWS, rules)),
              flush=True)
    by_rule: Dict[str, List[str]] = {}
    for d in HAND_MADE:
        by_rule.setdefault(d.rule, [])
    print("\nwritten dialogues with the expected words in the query, per rule: " + ", ".join(
        f"{rule} ({sum(d.rule == rule for d in HAND_MADE)})" for rule in by_rule))
    for row, rules in rows.items():
        cells = []
        for rule in by_rule:
            got = 0
            for d in (x for x in HAND_MADE if x.rule == rule):
                c = contextualize(d.question, [HistoryTurn(q, a) for q, a in d.history], rules)
                got += all(word in c.query[len(d.question):] for word in d.expected)
            cells.append(f"{rule} {got}")
        print(f"{row} | " + " | ".join(cells), flush=True)


CONVERSATION_WORDS: Dict[str, Dict[str, object]] = {"default": {}, "conversation words off": {"conversation_words": ()}}
"""``--conversation-words`` rows."""


def conversation_words(sets: Mapping[str, ConvSet], chunks: Sequence[int], cache: "EmbeddingCache",
                       analyzer: "Analyzer", mode: str) -> None:
    """Print, for each :data:`CONVERSATION_WORDS` row: ``ctx-fuse``'s gap closed and worse share per set and chunk on
    all dialogues and each half, and the Chinese rewrite set's agreement per half (:func:`zh_agreement`)."""
    from llama_index_convrag.conversational.contextualize import ContextRules

    if sets:
        rule_rows("conversation words", CONVERSATION_WORDS, sets, chunks, cache, analyzer, mode, halves=True)
    print(f"\nzh_utterance_rewrite ({ZH_ROWS} rows; halves of {ZH_ROWS // 2}): human-added characters recovered / "
          f"rows with only wrong additions (all; first half; second half)")
    for row, fields in CONVERSATION_WORDS.items():
        agreement = zh_agreement(ZH_ROWS, ContextRules(**fields))
        print(f"{row} | " + "; ".join(f"{100 * r:.1f}% / {100 * w:.1f}%" for r, w in agreement), flush=True)


ZH_ROWS = 4000
"""``--followups``: the first rows of the Chinese rewrite set read (two halves of ``ZH_ROWS // 2``)."""
_ZH_FUNCTION = frozenset("的了是吗呢吧啊呀哦嗯么我你他她它这那有在和与也都就不很还要会说过着被把给让对从到个些里上下中哪谁啥几又再才更最太真好")


def zh_agreement(rows: int, rules: "ContextRules") -> List[Tuple[float, float]]:
    """(share of the characters the human rewrite added that the query adds too, share of rows whose query adds
    words none of which the human rewrite holds) over all ``rows`` rows and each half. Characters: CJK, less function
    characters; a row counts only when the human rewrite added one."""
    from bench._data import shared_data
    from llama_index_convrag.conversational.contextualize import HistoryTurn, contextualize

    per: List[Tuple[float, bool]] = []
    with open(shared_data() / "zh_utterance_rewrite" / "rewrite.jsonl", encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n >= rows:
                break
            r = json.loads(line)
            human = {ch for ch in r["rewrite"] if "\u3400" <= ch <= "\u9fff" and ch not in _ZH_FUNCTION
                     and ch not in r["utterance"]}
            if not human:
                continue
            c = contextualize(r["utterance"], [HistoryTurn(r["context"][0], r["context"][1])], rules)
            extra = c.query[len(c.question):]
            wrong = bool(c.added) and not any(a.term in r["rewrite"] for a in c.added)
            per.append((len(human & set(extra)) / len(human), wrong))
    half = len(per) // 2
    return [(float(np.mean([x for x, _ in part])), float(np.mean([w for _, w in part])))
            for part in (per, per[:half], per[half:])]


ORACLE_SCALES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
"""``--weight-oracle``: the factors the expanded list's fusion weight is scaled by (1 = ``ctx-fuse``)."""


class ScaledPlan(WrappedPlan):
    """A contextualised plan whose expanded-list weight is scaled by ``scale`` (``--weight-oracle``)."""

    def __init__(self, c, scale: float) -> None:
        super().__init__(c)
        self.scale = scale

    def weight_given(self, texts):
        coverage, weight = super().weight_given(texts)
        return coverage, weight * self.scale


def weight_oracle(sets: Mapping[str, ConvSet], chunks: Sequence[int], cache: "EmbeddingCache", analyzer: "Analyzer",
                  mode: str) -> None:
    """Print, per set and chunk size, ``ctx-fuse`` with its expanded-list weight scaled by each of
    :data:`ORACLE_SCALES`, and the oracle that picks the best scale for each follow-up from its gold labels: how much
    of the gap any choice of weight over these same two lists could close (an analysis, not a strategy)."""
    ctx = make_ctx(True)
    for name, s in sets.items():
        for chunk in chunks:
            index = Index(s.corpus, chunk, cache, analyzer)
            raw, manual, follow = judged_baselines(index, s, mode)  # every judged turn, as the main table averages
            by_scale: Dict[float, List[float]] = {x: [] for x in ORACLE_SCALES}
            best = []
            for d in s.dialogues:
                for i, turn in enumerate(d.turns):
                    if not turn.relevant:
                        continue
                    plan = ctx(d.turns[:i], turn)  # a first turn or an unexpanded one: its raw question at every scale
                    scores = [ndcg_of(index, plan if len(plan) == 1 else
                                      [plan[0], (plan[1][0], ScaledPlan(plan[1][1], x))], mode, turn.relevant)
                              for x in ORACLE_SCALES]
                    for x, v in zip(ORACLE_SCALES, scores):
                        by_scale[x].append(v)
                    best.append(max(scores))
            rows = [*((f"x{x:g}", v) for x, v in by_scale.items()), ("oracle", best)]
            cells = [f"{label} {gap_and_worse(v, raw, manual, follow)}" for label, v in rows]
            print(f"{name}/{chunk} ({sum(follow)} follow-ups; gap closed / worse): " + " | ".join(cells), flush=True)


VARIANT_STRATEGIES = ("raw", "ctx-fuse", "manual")
"""``--variants`` rows: the follow-up as asked, the package's contextualised search and the human rewrite."""


def variant_followups(sets: Mapping[str, ConvSet], chunks: Sequence[int], analyzer: "Analyzer", mode: str,
                      keep_sets: Sequence[str] = (), weights: str = "int8", activations: str = "dynamic",
                      recipes: Sequence[str] = ()) -> None:
    """Print, per set, chunk size and part (all / dev / test dialogues), the follow-ups' nDCG@10 with the local
    model's ``fp32`` variant and with ``int8`` (and an int8 copy keeping each of ``keep_sets``' layers in float, its
    weights of type ``weights``, activations ``activations``) on the same turns, the paired difference to fp32 with its 95% bootstrap interval,
    and the share of the raw -> human gap ``ctx-fuse`` closes with each. With ``recipes`` (``bench/_recipes.py``
    specs) only fp32 and those copies."""
    from bench._data import recipe_model
    from bench._recipes import spec_model
    from bench.chunking import paired_ci
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding

    variants = ("fp32",) if recipes else ("fp32", "int8")
    models = {v: LocalMiniLMEmbedding(variant=v, query_cache_size=0) for v in variants}
    models.update(recipe_model(keep, weights, activations) for keep in keep_sets)
    models.update(spec_model(spec) for spec in recipes)
    caches = {label: EmbeddingCache(m) for label, m in models.items()}
    strategies = {k: fn for k, fn in strategies_default().items() if k in VARIANT_STRATEGIES}
    print("| set | chunk | part | follow-ups | strategy | variant | fp32 nDCG@10 | variant nDCG@10 | variant - fp32 "
          "[95% CI] | gap closed fp32 | gap closed variant |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for name, s in sets.items():
        dialogue_of = {t.turn_id: di for di, d in enumerate(s.dialogues) for t in d.turns}
        for chunk in chunks:
            per: Dict[str, Dict[str, Dict[str, Dict[str, float]]]] = {}
            for label, cache in caches.items():
                per[label], follow, _, _ = turn_scores(s, Index(s.corpus, chunk, cache, analyzer), strategies, mode)
                cache.save()
            for part, inside in (("all", lambda di: True), ("dev", lambda di: di % 2 == 0),
                                 ("test", lambda di: di % 2 == 1)):
                turns = sorted(t for t in follow if inside(dialogue_of[t]))
                got = {v: {k: [per[v][k][t]["ndcg@10"] for t in turns] for k in strategies} for v in caches}
                gap = {v: (np.mean(g["ctx-fuse"]) - np.mean(g["raw"])) / (np.mean(g["manual"]) - np.mean(g["raw"]))
                       for v, g in got.items()}
                for label in list(caches)[1:]:
                    for k in strategies:
                        diff = "{:+.4f} [{:+.4f}, {:+.4f}]".format(*paired_ci(got["fp32"][k], got[label][k]))
                        gaps = f"{100 * gap['fp32']:.1f}% | {100 * gap[label]:.1f}%" if k == "ctx-fuse" else " | "
                        print(f"| {name} | {chunk} | {part} | {len(turns)} | {k} | {label} | "
                              f"{np.mean(got['fp32'][k]):.4f} | {np.mean(got[label][k]):.4f} | {diff} | {gaps} |",
                              flush=True)


SHOWN_ANSWERS = (("none", 3), ("gold", 1), ("gold", 3), ("extractive", 1), ("extractive", 3))
"""``--shown-answers`` rows: (the answers the history holds, ``contextualize``'s ``answer_repeat_cap``; 1 = a repeated
name counts once, 3 = the default)."""
EXTRACTIVE = (5, 3)
"""The extractive answer ``--shown-answers`` shows: the 3 sentences of the first 5 fused results closest to the
question (embedding cosine), in result order, as the retrieval-only engine's default ``Extractive`` synthesizer does."""


def shown_answers(sets: Mapping[str, ConvSet], chunks: Sequence[int], cache: "EmbeddingCache", analyzer: "Analyzer",
                  mode: str) -> None:
    """Print ``ctx-fuse``'s gap closed and worse share when the history's answers are none, the gold ones (the main
    table; an answering LLM that is right) or the system's own extractive answers (a retrieval-only session: each turn
    shows sentences of its own fused results, so every dialogue runs turn by turn), for each :data:`SHOWN_ANSWERS`."""
    from llama_index_convrag.conversational.contextualize import ContextRules, HistoryTurn, contextualize
    from llama_index_convrag.synthesizers.sentences import split_sentences

    top, count = EXTRACTIVE
    for name, s in sets.items():
        sentences = {d: split_sentences(text) for d, text in s.corpus.items()}
        if mode != "sparse":
            cache.embed([x for v in sentences.values() for x in v] + [t.utterance for d in s.dialogues for t in d.turns])
        for chunk in chunks:
            index = Index(s.corpus, chunk, cache, analyzer)
            raw, manual, follow = judged_baselines(index, s, mode)
            cells = []
            for shown, cap in SHOWN_ANSWERS:
                got = []
                for d in s.dialogues:
                    history: List[HistoryTurn] = []
                    for i, turn in enumerate(d.turns):
                        c = contextualize(turn.utterance, history, ContextRules(answer_repeat_cap=cap))
                        plan = [(c.question, 1.0)] if c.query == c.question else \
                            [(c.question, c.question_weight), (c.query, c)]
                        if mode != "sparse":
                            cache.embed([q for q, _ in plan])
                        ranked = run_plan(index, plan, mode)
                        answer = ""
                        if shown == "gold":
                            answer = turn.answer or ""
                        elif shown == "extractive":
                            pool = [x for doc in ranked[:top] for x in sentences[doc]]
                            if pool:
                                near = cache.embed(pool) @ cache.embed([turn.utterance])[0]
                                answer = " ".join(pool[j] for j in sorted(np.argsort(-near)[:count]))
                        history.append(HistoryTurn(turn.utterance, answer))
                        if turn.relevant:
                            got.append(turn_metrics(ranked, turn.relevant)["ndcg@10"])
                cells.append(f"{shown} cap {cap}: {gap_and_worse(got, raw, manual, follow)}")
            print(f"{name}/{chunk} (gap closed / worse) " + " | ".join(cells), flush=True)
        cache.save()


SHIFT_ANSWER_ROWS: Dict[str, Dict[str, str]] = {
    "against every answer (default)": {"shift_answers": "all"}, "against the last answer": {"shift_answers": "last"},
}
"""``--shift-answers`` rows: the answers a follow-up's terms are counted new against in the topic-shift check
(:class:`ContextRules` ``shift_answers``), beside every earlier question."""


def shift_answers(sets: Mapping[str, ConvSet], chunks: Sequence[int], cache: "EmbeddingCache", analyzer: "Analyzer",
                  mode: str) -> None:
    """:func:`rule_rows` for each row of :data:`SHIFT_ANSWER_ROWS`, on all dialogues and on each half."""
    rule_rows("shift answers", SHIFT_ANSWER_ROWS, sets, chunks, cache, analyzer, mode, halves=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="cast21,cast22,canard")
    p.add_argument("--chunks", default="256,700")
    p.add_argument("--mode", default="hybrid", choices=["hybrid", "dense", "sparse"])
    p.add_argument("--split", default="all", choices=["dev", "test", "all"])
    p.add_argument("--json", default=None, help="write the rows here")
    p.add_argument("--weights-grid", action="store_true", help="only ctx-fuse over WEIGHT_GRID (first chunk size)")
    p.add_argument("--agreement-grid", action="store_true", help="only ctx-fuse over AGREEMENT_GRID (every chunk size)")
    p.add_argument("--weight-oracle", action="store_true",
                   help="only ctx-fuse at scaled expanded-list weights and the per-follow-up best (every chunk size)")
    p.add_argument("--term-rules", action="store_true",
                   help="only ctx-fuse with the repeated-name and named-shift rules off or set otherwise (every chunk size)")
    p.add_argument("--followups", action="store_true",
                   help="only ctx-fuse with the follow-up rules (answer subject, topic switch, list items) off / on, "
                        "per half, plus the Chinese rewrite set and the written dialogues")
    p.add_argument("--conversation-words", action="store_true",
                   help="only ctx-fuse with ContextRules.conversation_words on / off, per half, plus the Chinese set")
    p.add_argument("--shown-answers", action="store_true",
                   help="only ctx-fuse with no, gold or the system's own extractive answers in the history")
    p.add_argument("--shift-answers", action="store_true",
                   help="only ctx-fuse with the topic-shift check against every answer / the last one, per half")
    p.add_argument("--zh", type=int, default=0, metavar="N", help="only the Chinese term-level check on N rows")
    p.add_argument("--variant", default=None, help="the local model's variant (fp32 / int8; default: the model's)")
    p.add_argument("--variants", action="store_true",
                   help="only the follow-ups' nDCG@10 with the fp32 and int8 variants side by side, per half")
    p.add_argument("--keep-float-weights", choices=("int8", "uint8"), default="int8",
                   help="--variants: the weight type of the --keep-float copies (uint8: ORT's U8U8 kernels)")
    p.add_argument("--keep-float-activations", choices=("dynamic", "static"), default="dynamic",
                   help="--variants: the --keep-float copies' activation scales (static: calibrated once)")
    p.add_argument("--keep-float", action="append", default=[], metavar="LAYERS",
                   help="--variants: also an int8 copy keeping these layers in float (layer<i>.<role>,...; repeatable)")
    p.add_argument("--recipe", action="append", default=[], metavar="SPEC",
                   help="--variants: only fp32 and the int8 copy of each recipe (bench/_recipes.py specs; repeatable)")
    args = p.parse_args(argv)
    if args.zh:
        print(json.dumps(zh_term_recall(args.zh)))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding

    model = LocalMiniLMEmbedding() if args.variant is None else LocalMiniLMEmbedding(variant=args.variant)
    cache = EmbeddingCache(model)
    analyzer = Analyzer()
    sets = load_sets([x for x in args.sets.split(",") if x])
    results = {}
    if args.variants:
        variant_followups(sets, [int(c) for c in args.chunks.split(",")], analyzer, args.mode, args.keep_float,
                          args.keep_float_weights, args.keep_float_activations, args.recipe)
        return 0
    if args.weights_grid:
        weights_grid(sets, int(args.chunks.split(",")[0]), cache, analyzer, args.mode)
        cache.save()
        return 0
    analysis = next((fn for flag, fn in (("shown_answers", shown_answers), ("weight_oracle", weight_oracle),
                                         ("agreement_grid", agreement_grid), ("term_rules", term_rules),
                                         ("followups", followups), ("conversation_words", conversation_words),
                                         ("shift_answers", shift_answers))
                     if getattr(args, flag)), None)
    if analysis is not None:  # each runs at every chunk size asked
        analysis(sets, [int(c) for c in args.chunks.split(",")], cache, analyzer, args.mode)
        cache.save()
        return 0
    try:
        for name, s in sets.items():
            for chunk in [int(c) for c in args.chunks.split(",")]:
                index = Index(s.corpus, chunk, cache, analyzer)
                strategies = strategies_default()
                rows = evaluate(s, index, strategies, args.mode, args.split)
                results[f"{name}/{chunk}"] = rows
                print_table(name, chunk, rows)
                cache.save()
    finally:
        cache.save()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
