"""Scratch study: ways to bring more of multi-hop questions' evidence into episodic recall's best 10, on LoCoMo.

Over the question pools of ``bench/recall_rescore_study.py`` (cached in ``bench/out/recall_pool.pkl``; each variant
re-scores them in Python, then the speaker and bridge steps as the package runs them), recall@10 of the evidence per
half (tune = conversations 0-2, check = 3-4), per category, and multi-hop per half:

* ``spread``: a message inheriting from the message two positions away (two before: ``RecallRules.second_spread``;
  two after; both) or three away;
* ``lists``: a third searched list fused into the four (weighted, min-max normalised, or by rank), each one more
  Milvus search per recall, searched once per setting (Milvus Lite) and cached (``bench/out/multihop_lists.pkl``):
  BM25 of the conversation's words near a query word (the bridge's word vectors; no question words), a dense
  search from the mean vector of the best m candidates, BM25 of the question with the best m candidates' words;
* ``ranks``: where multi-hop evidence ranks after the default steps (top 10, 10-29, outside the pool of 30);
* ``cost``: CPU per recall of spreading and selecting the pool, with and without the second spread.

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/recall_multihop_study.py [--studies spread,lists,ranks,cost]
"""

from __future__ import annotations

import pickle
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT  # noqa: E402
from memory_recall import OWNER, load_locomo  # noqa: E402
from recall_rescore_study import bridge_table, evaluate, indexed, load  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.memory.bridge import bridge_scores  # noqa: E402
from llama_index_convrag.memory.episodic_schema import CONTEXT, DENSE_FIELD, OWN, SPARSE_FIELD  # noqa: E402
from llama_index_convrag.memory.episodic_search import BM25_PARAMS, DENSE_PARAMS, search_expr, split  # noqa: E402
from llama_index_convrag.memory.rules import RecallRules, best, boost_speaker, named_speaker, spread_scores  # noqa: E402
from llama_index_convrag.retrievers import fusion  # noqa: E402

LISTS = OUT / "multihop_lists.pkl"
DEFAULT = RecallRules()
NO_SECOND = RecallRules(second_spread=0.0)
Lists = Dict[Tuple[int, int], Dict[int, List[Tuple[int, float]]]]


class Study:
    """The cached pools, the bridge's words and vectors, and the re-scoring pipeline the package runs."""

    def __init__(self) -> None:
        self.convs = load_locomo()
        self.data = load()
        self.uw, self.qw, self.vec = bridge_table(self.convs)
        self.client: Any = None
        self.lists: Dict[str, Lists] = pickle.loads(LISTS.read_bytes()) if LISTS.is_file() else {}

    def scores(self, ci: int, qi: int, fused: Dict[int, float], rules: RecallRules = DEFAULT,
               extra_spread: Sequence[Tuple[int, float]] = (), pool: Optional[int] = None,
               before_pool: Optional[Callable[[int, int, Dict[int, float]], Dict[int, float]]] = None
               ) -> Dict[int, float]:
        """Spread (plus ``extra_spread``: ``(offset, share)``, position p + offset gaining share x p's fused score;
        then ``before_pool`` when given), the pool (``rules.pool(10)`` unless ``pool``), the speaker step, the bridge
        step."""
        units = self.convs[ci]["units"]
        sc = {p: s for p, (s, _) in spread_scores(fused, rules).items() if p < len(units)}
        for p, s in fused.items():
            for offset, share in extra_spread:
                if 0 <= p + offset < len(units):
                    sc[p + offset] = sc.get(p + offset, 0.0) + share * s
        if before_pool is not None:
            sc = before_pool(ci, qi, sc)
        kept = best(sc, pool if pool is not None else rules.pool(10))
        speakers = {p: units[p].speaker for p in kept}
        named = named_speaker(self.convs[ci]["questions"][qi]["question"], speakers.values())
        s = boost_speaker({p: sc[p] for p in kept}, speakers, named, rules.speaker_boost)
        got = bridge_scores(s, self.qw[(ci, qi)], {p: self.uw[(ci, p)] for p in s}, self.vec, rules)
        return {p: v["score"] for p, v in got.items()}

    def run(self, name: str, rules: RecallRules = DEFAULT, extra_spread: Sequence[Tuple[int, float]] = (),
            lists: Optional[Lists] = None, weight: float = 0.0, by_rank: bool = False) -> None:
        def rescore(ci: int, qi: int, _: Dict[int, float]) -> Dict[int, float]:
            fused = dict(self.data["pools"][(ci, qi)]["fused"])
            if lists is not None:
                found = lists[(ci, qi)]
                add = fusion.rrf([found[OWN], found[CONTEXT]]) if by_rank else \
                    fusion.weighted([found[OWN], found[CONTEXT]], [0.5, 0.5])
                top = max((v for _, v in add), default=1.0) or 1.0
                for p, v in add:
                    fused[p] = fused.get(p, 0.0) + weight * v / (top if by_rank else 1.0)
            return self.scores(ci, qi, fused, rules, extra_spread)
        evaluate(self.convs, self.data, name, rescore=rescore)

    def searched(self, name: str, query: Callable[[int, int], Optional[Tuple[str, Any, Dict[str, Any]]]]) -> Lists:
        """One more search per question (``query``: field, data, params; None: no search), split by kind."""
        if name in self.lists:
            return self.lists[name]
        if self.client is None:
            self.client, _, _ = indexed(self.convs, LocalMiniLMEmbedding(), "multihop_memory")
        out: Lists = {}
        c0 = time.process_time()
        for ci, c in enumerate(self.convs):
            expr = search_expr(OWNER, f"locomo-{ci}", None)
            for qi in range(len(c["questions"])):
                call = query(ci, qi)
                if call is None:
                    out[(ci, qi)] = {OWN: [], CONTEXT: []}
                    continue
                field, data, params = call
                hits = self.client.search("multihop_memory", data=[data], anns_field=field, limit=2 * DEFAULT.depth,
                                          filter=expr, search_params=params, output_fields=[])[0]
                out[(ci, qi)] = {kind: [(int(key), score) for key, score in ranked]
                                 for kind, ranked in split(hits, DEFAULT.depth).items()}
        print(f"searched {name}: {time.process_time() - c0:.0f} s CPU for {len(out)} questions")
        self.lists[name] = out
        LISTS.write_bytes(pickle.dumps(self.lists))
        return out

    def close(self) -> None:
        if self.client is not None:
            self.client.drop_collection("multihop_memory")


def study_spread(st: Study) -> None:
    st.run("no second spread (the earlier default)", NO_SECOND)
    for share in (0.2, 0.3, 0.4, 0.5):
        st.run(f"two before, share {share}", RecallRules(second_spread=share))
        st.run(f"two after, share {share}", NO_SECOND, extra_spread=[(-2, share)])
        st.run(f"both ways, share {share}", NO_SECOND, extra_spread=[(2, share), (-2, share)])
        st.run(f"three apart, share {share}", NO_SECOND, extra_spread=[(3, share), (-3, share)])
    st.run("two before 0.4, two after 0.1", extra_spread=[(-2, 0.1)])


def study_lists(st: Study) -> None:
    convs, uw, qw, vec = st.convs, st.uw, st.qw, st.vec
    vocab = {}
    for ci, c in enumerate(convs):
        ws = sorted({w for u in c["units"] for w in uw[(ci, u.position)] if w in vec})
        vocab[ci] = (ws, np.stack([vec[w] for w in ws]))

    def near_words(ci: int, qi: int, t: float, m: int) -> List[str]:
        ws, matrix = vocab[ci]
        out: List[str] = []
        for w in qw[(ci, qi)]:
            if w in vec:
                sims = matrix @ vec[w]
                out += [ws[j] for j in np.argsort(-sims)[:m + 1] if sims[j] >= t and ws[j] != w][:m]
        return list(dict.fromkeys(out))

    def first(ci: int, qi: int, m: int) -> List[int]:
        return best(st.scores(ci, qi, dict(st.data["pools"][(ci, qi)]["fused"])), m)

    for t, m in ((0.5, 3), (0.6, 3), (0.45, 5)):
        found = st.searched(f"near words t {t} m {m}", lambda ci, qi, t=t, m=m: (
            (SPARSE_FIELD, " ".join(near_words(ci, qi, t, m)), BM25_PARAMS) if near_words(ci, qi, t, m) else None))
        for w in (0.1, 0.2, 0.3, 0.5):
            st.run(f"+ near-words list t {t} m {m} w {w}", lists=found, weight=w)
        st.run(f"+ near-words list t {t} m {m} by rank w 0.2", lists=found, weight=0.2, by_rank=True)
    own = st.data["own"]
    for m in (3, 5):
        def centroid(ci: int, qi: int, m: int = m) -> Tuple[str, Any, Dict[str, Any]]:
            v = np.mean([own[(ci, p)] for p in first(ci, qi, m)], axis=0)
            return DENSE_FIELD, (v / np.linalg.norm(v)).tolist(), DENSE_PARAMS
        found = st.searched(f"dense from best {m}", centroid)
        for w in (0.1, 0.2, 0.3):
            st.run(f"+ dense list from the best {m} w {w}", lists=found, weight=w)
    for m, n in ((3, 8), (5, 12)):
        def second_hop(ci: int, qi: int, m: int = m, n: int = n) -> Tuple[str, Any, Dict[str, Any]]:
            q = set(qw[(ci, qi)])
            ws = list(dict.fromkeys(w for p in first(ci, qi, m) for w in uw[(ci, p)] if w not in q))[:n]
            return SPARSE_FIELD, convs[ci]["questions"][qi]["question"] + " " + " ".join(ws), BM25_PARAMS
        found = st.searched(f"second hop best {m} words {n}", second_hop)
        for w in (0.1, 0.2, 0.3):
            st.run(f"+ second-hop BM25 list best {m} words {n} w {w}", lists=found, weight=w)


def study_ranks(st: Study) -> None:
    for label, rules in (("earlier default", NO_SECOND), ("default", DEFAULT)):
        where: Counter = Counter()
        for ci, c in enumerate(st.convs):
            for qi, q in enumerate(c["questions"]):
                if q["category"] != 1:
                    continue
                order = best(st.scores(ci, qi, dict(st.data["pools"][(ci, qi)]["fused"]), rules), 10 ** 6)
                for e in q["evidence"]:
                    r = order.index(e) if e in order else None
                    where["top 10" if r is not None and r < 10 else "10-29" if r is not None else "outside"] += 1
        total = sum(where.values())
        print(f"multi-hop evidence ({total}), {label}: " + ", ".join(f"{k} {v / total:.3f}" for k, v in where.items()))


def study_cost(st: Study) -> None:
    """CPU of spreading and selecting the pool per recall (``spread_scores`` + ``select``, the step the second
    spread changes), with and without it, side by side (alternating rounds)."""
    import os

    from llama_index_convrag.memory.rules import select

    pools = [entry["fused"] for entry in st.data["pools"].values()]
    arms = {"second spread 0.4": DEFAULT, "none": NO_SECOND}
    cpu: Dict[str, List[float]] = {name: [] for name in arms}
    for rnd in range(8):
        for name in (list(arms) if rnd % 2 == 0 else list(arms)[::-1]):
            c0 = time.process_time()
            for fused in pools:
                select(spread_scores(fused, arms[name]), arms[name].pool(10))
            cpu[name].append((time.process_time() - c0) * 1000 / len(pools))
    med = {name: float(np.median(v)) for name, v in cpu.items()}
    print(f"spread + select per recall ({len(pools)} pools, 8 alternating rounds, load average "
          f"{os.getloadavg()[0]:.1f}): " + ", ".join(f"{k} {v:.3f} ms CPU" for k, v in med.items())
          + f", difference {med['second spread 0.4'] - med['none']:+.3f} ms")


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", default="spread,lists,ranks,cost")
    args = ap.parse_args()
    st = Study()
    st.run("default (second spread 0.4)")
    studies = {"spread": study_spread, "lists": study_lists, "ranks": study_ranks, "cost": study_cost}
    try:
        for name in args.studies.split(","):
            studies[name](st)
    finally:
        st.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
