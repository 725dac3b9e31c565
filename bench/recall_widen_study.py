"""Scratch study: ways to widen what episodic recall ranks on LoCoMo (multi-hop evidence lies outside the pool).

Each question's two searches (``episodic_search.search_calls``, Milvus Lite) are made once with 200 hits each and
cached (``bench/out/recall_hits_ctx<N>.pkl``, N the rules' ``context_before``); each variant then takes the first
``2 x depth`` hits as the package's search returns them, splits, fuses, spreads, cuts the pool and runs the speaker
and bridge steps in Python as the package does (``bench/recall_multihop_study.py``'s ``Study.scores``), so its
default row is the bench's default. Recall@10 of the evidence per half (tune = conversations 0-2, check = 3-4),
per category, and multi-hop per half:

* ``kept``: more fused candidates kept before spreading (the fusion's cut, 75-150) with the pool of 30 or 60;
  deeper lists (75, 100); each list divided by its best score instead of min-max normalised;
* ``session``: the messages of the sessions (day blocks) whose candidates score highest raised: a session's mass is
  the sum of its best m spread scores (m = 3, 5, all), each message's score x (1 + b x mass / the best mass);
* ``prf``: pseudo-relevance feedback in the process, no Milvus call: the n words most frequent in the best m after
  the bridge and not in the question; each candidate of the pool gains lam x the share of them it holds;
* ``rows``: the bridge over every message of the conversation (the row cache's), not only the pool: a message gains
  w x its bridged share before spreading (all messages, or those with a share of at least 0.5, or 1: a word near
  every query word);
* ``context``: each message's context row built from the two messages before it (``context_before=2``: its
  speaker's previous message too), re-indexed; with the second spread (which reads the same message in score space)
  at 0.4, 0.2 and off.

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/recall_widen_study.py [--studies kept,session,prf,rows,context]
"""

from __future__ import annotations

import pickle
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, cached_embeddings, fresh_dir  # noqa: E402
from memory_recall import OWNER, TableEmbedding  # noqa: E402
from recall_multihop_study import DEFAULT, Study  # noqa: E402
from recall_rescore_study import evaluate  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.memory.bridge import bridge_scores  # noqa: E402
from llama_index_convrag.memory.episodic import EpisodicMemory, unit_texts  # noqa: E402
from llama_index_convrag.memory.episodic_schema import CONTEXT, OWN  # noqa: E402
from llama_index_convrag.memory.episodic_search import hit_pairs, search_calls, search_expr, split  # noqa: E402
from llama_index_convrag.memory.rules import RecallRules, best  # noqa: E402
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus  # noqa: E402
from llama_index_convrag.retrievers import fusion  # noqa: E402

HITS = 200
Hits = Dict[Tuple[int, int], List[List[Tuple[str, float]]]]


def searched(st: Study, context_before: int) -> Hits:
    """Every question's dense and BM25 hits (``HITS`` each) over the conversations indexed with ``context_before``."""
    path = OUT / f"recall_hits_ctx{context_before}.pkl"
    if path.is_file():
        return pickle.loads(path.read_bytes())
    model, rules = LocalMiniLMEmbedding(), RecallRules(context_before=context_before)
    # the default layout's texts from the bench's cache; the texts another layout adds are embedded while indexing
    texts = sorted({t for c in st.convs for _, own, ctx in unit_texts(c["units"], (), DEFAULT) for t in (own, ctx)})
    vectors = dict(zip(texts, cached_embeddings(model, texts, "locomo").tolist()))
    target = MilvusTarget(uri=str(fresh_dir("recall_widen") / "memory.db"))
    client = connect_milvus(target)
    memory = EpisodicMemory.from_defaults(embed_model=TableEmbedding(vectors, model), client=client, target=target,
                                          collection_name="widen_memory", rules=rules)
    for c in st.convs:
        memory.index(c["units"])
    out: Hits = {}
    wide = RecallRules(depth=HITS // 2)
    for ci, c in enumerate(st.convs):
        expr = search_expr(OWNER, f"locomo-{ci}", None)
        for qi, q in enumerate(c["questions"]):
            calls = search_calls("widen_memory", expr, model.get_query_embedding(q["question"]), q["question"], wide)
            out[(ci, qi)] = [[(str(i), float(d)) for i, d in hit_pairs(client.search(*call.args, **call.kwargs)[0])]
                             for call in calls]
    client.drop_collection("widen_memory")
    path.write_bytes(pickle.dumps(out))
    return out


def by_best(lists: List[List[Tuple[str, float]]], weights: Tuple[float, ...]) -> List[Tuple[str, float]]:
    """Weighted fusion with each list divided by its best score (instead of min-max)."""
    scores: Dict[str, float] = {}
    for ranked, w in zip(lists, weights):
        top = ranked[0][1] if ranked and ranked[0][1] > 0 else 1.0
        for key, s in ranked:
            scores[key] = scores.get(key, 0.0) + w * s / top
    return sorted(scores.items(), key=lambda item: -item[1])


class Widen:
    """The fused candidates of a question from the cached hits, and the package's steps after them."""

    def __init__(self, st: Study, hits: Hits) -> None:
        self.st, self.hits = st, hits

    def fused(self, ci: int, qi: int, depth: int = DEFAULT.depth, kept: Optional[int] = None,
              norm: str = "minmax") -> Dict[int, float]:
        dense, bm25 = ([{"id": i, "distance": d} for i, d in h[:2 * depth]] for h in self.hits[(ci, qi)])
        by_dense, by_bm25 = split(dense, depth), split(bm25, depth)
        lists = [by_dense[OWN], by_bm25[OWN], by_dense[CONTEXT], by_bm25[CONTEXT]]
        ranked = fusion.weighted(lists, DEFAULT.weights()) if norm == "minmax" else by_best(lists, DEFAULT.weights())
        return {int(key): score for key, score in ranked[:kept if kept is not None else depth]}

    def run(self, name: str, fused: Optional[Callable[[int, int], Dict[int, float]]] = None,
            after: Optional[Callable[[int, int, Dict[int, float]], Dict[int, float]]] = None,
            pool: Optional[int] = None, before_pool: Optional[Callable[..., Dict[int, float]]] = None,
            rules: RecallRules = DEFAULT) -> None:
        def rescore(ci: int, qi: int, _: Dict[int, float]) -> Dict[int, float]:
            got = fused(ci, qi) if fused is not None else self.fused(ci, qi)
            out = self.st.scores(ci, qi, got, rules, pool=pool, before_pool=before_pool)
            return after(ci, qi, out) if after is not None else out
        evaluate(self.st.convs, self.st.data, name, rescore=rescore)


def study_kept(w: Widen) -> None:
    for kept in (75, 100, 150):
        for pool in (30, 60):
            w.run(f"fusion keeps {kept}, pool {pool}", lambda ci, qi, kept=kept: w.fused(ci, qi, kept=kept), pool=pool)
    for depth in (75, 100):
        w.run(f"lists of {depth}, fusion keeps {depth}", lambda ci, qi, d=depth: w.fused(ci, qi, depth=d))
    for depth in (50, 100):
        w.run(f"lists of {depth} divided by their best", lambda ci, qi, d=depth: w.fused(ci, qi, depth=d, norm="best"))


def study_session(w: Widen) -> None:
    units = {ci: c["units"] for ci, c in enumerate(w.st.convs)}

    def raise_sessions(b: float, m: int) -> Callable[..., Dict[int, float]]:
        def f(ci: int, qi: int, scores: Dict[int, float]) -> Dict[int, float]:
            per: Dict[str, List[float]] = defaultdict(list)
            for p, s in scores.items():
                per[units[ci][p].session].append(s)
            mass = {s: sum(sorted(v, reverse=True)[:m]) for s, v in per.items()}
            top = max(mass.values(), default=1.0) or 1.0
            return {p: s * (1 + b * mass[units[ci][p].session] / top) for p, s in scores.items()}
        return f
    for m in (3, 5, 10 ** 6):
        for b in (0.1, 0.2, 0.4):
            w.run(f"sessions by their best {m if m < 10 ** 6 else 'all'}, x(1 + {b} mass)",
                  before_pool=raise_sessions(b, m))


def study_prf(w: Widen) -> None:
    uw, qw = w.st.uw, w.st.qw

    def feedback(m: int, n: int, lam: float) -> Callable[[int, int, Dict[int, float]], Dict[int, float]]:
        def f(ci: int, qi: int, scores: Dict[int, float]) -> Dict[int, float]:
            asked = set(qw[(ci, qi)])
            counts = Counter(x for p in best(scores, m) for x in set(uw[(ci, p)]) if x not in asked)
            words = {x for x, _ in counts.most_common(n)}
            if not words:
                return scores
            return {p: s + lam * len(words & set(uw[(ci, p)])) / len(words) for p, s in scores.items()}
        return f
    for m in (3, 5):
        for n in (5, 10):
            for lam in (0.1, 0.2, 0.4):
                w.run(f"feedback: best {m}, {n} words, x{lam}", after=feedback(m, n, lam))


def study_rows(w: Widen) -> None:
    st = w.st
    shares: Dict[Tuple[int, int], Dict[int, float]] = {}
    c0 = time.process_time()
    for ci, c in enumerate(st.convs):
        every = {u.position: 0.0 for u in c["units"]}
        words = {p: st.uw[(ci, p)] for p in every}
        for qi in range(len(c["questions"])):
            got = bridge_scores(every, st.qw[(ci, qi)], words, st.vec, RecallRules(bridge_boost=1.0))
            shares[(ci, qi)] = {p: v["share"] for p, v in got.items() if v["share"] > 0}
    print(f"the bridge over every message: {1000 * (time.process_time() - c0) / len(shares):.2f} ms CPU per question "
          f"(this study's loop, words and vectors precomputed)")

    def with_rows(weight: float, least: float) -> Callable[[int, int], Dict[int, float]]:
        def f(ci: int, qi: int) -> Dict[int, float]:
            got = w.fused(ci, qi)
            for p, share in shares[(ci, qi)].items():
                if share >= least:
                    got[p] = got.get(p, 0.0) + weight * share
            return got
        return f
    for weight in (0.1, 0.2, 0.3):
        for least in (0.0, 0.5, 1.0):
            w.run(f"bridge over every message x{weight}, share >= {least}", with_rows(weight, least))


def study_context(w: Widen) -> None:
    two = Widen(w.st, searched(w.st, 2))
    two.run("context rows of the two messages before")
    two.run("the same, fusion keeps 100", lambda ci, qi: two.fused(ci, qi, kept=100))
    for share in (0.0, 0.2):
        two.run(f"the same, second spread {share}", rules=RecallRules(context_before=2, second_spread=share))


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", default="kept,session,prf,rows,context")
    args = ap.parse_args()
    st = Study()
    w = Widen(st, searched(st, 1))
    w.run("default (from the cached hits)")
    studies = {"kept": study_kept, "session": study_session, "prf": study_prf, "rows": study_rows,
               "context": study_context}
    for name in args.studies.split(","):
        studies[name](w)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
