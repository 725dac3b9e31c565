"""Scratch study: a second hop of episodic recall on LoCoMo, a search that brings new candidates into the pool.

Each question's first ranking is the package's (``bench/recall_widen_study.py``'s cached hits, fused, spread, pooled,
the speaker and bridge steps: ``bench/recall_multihop_study.py``'s ``Study.scores``). A second search is then made
from what the first found (Milvus Lite, the same rows; searched once per setting and cached in
``bench/out/recall_hop_lists.pkl``); its hits, split by kind and fused (min-max, own and context lists alike), are
added to the first fusion at weight ``w`` before spreading, and the package's steps run again. Recall@10 of the
evidence per half (tune = conversations 0-2, check = 3-4), per category, and multi-hop per half:

* ``dense``: the own-text vectors of the best m messages, each its own query (one call, m queries; the lists
  averaged or their maximum taken); the query vector moved toward their mean (Rocchio, q + b x mean);
* ``bm25``: the question with the names and numbers of the best m messages (the text layer's salient terms,
  speakers' names left out);
* ``session``: the dense and BM25 searches again, restricted to the s sessions whose best 3 messages score highest
  (deeper lists of those sessions);
* ``other``: the question's searches, or the best 3's vectors, kept out of the sessions of the best m;
* ``words``: BM25 of the question with the conversation's words nearest a query word and the words of the best m
  that the bridge matched to it (a vocabulary hop from found instances to other instances);
* ``reach``: for each cached second search, the share of the multi-hop evidence the first searches missed (or
  ranked outside the pool) that it returns;
* ``new``: each cached second search added to the candidates the first fusion did not keep only;
* ``context``: ``context_before=2`` (second spread off) with the dense hops, over the conversations indexed so;
* ``speaker``: when the question names one speaker, the two searches again restricted to that speaker's messages.

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/recall_hop_study.py [--studies speaker,session,dense,bm25,other,
        words,reach,new,context] [--weights 0.1,0.2,0.3]
"""

from __future__ import annotations

import pickle
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, cached_embeddings, fresh_dir  # noqa: E402
from memory_recall import OWNER, TableEmbedding  # noqa: E402
from recall_multihop_study import DEFAULT, Study  # noqa: E402
from recall_rescore_study import evaluate, indexed  # noqa: E402
from recall_widen_study import Widen, searched  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.memory.episodic import EpisodicMemory, unit_texts  # noqa: E402
from llama_index_convrag.memory.episodic_schema import CONTEXT, DENSE_FIELD, OWN, SPARSE_FIELD  # noqa: E402
from llama_index_convrag.memory.episodic_search import (  # noqa: E402
    BM25_PARAMS, DENSE_PARAMS, hit_pairs, search_expr, split)
from llama_index_convrag.memory.rules import RecallRules, best, named_speaker  # noqa: E402
from llama_index_convrag.memory.salient import salient_terms  # noqa: E402
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus  # noqa: E402
from llama_index_convrag.milvus.filters import quote_string  # noqa: E402
from llama_index_convrag.retrievers import fusion  # noqa: E402

HOPS = OUT / "recall_hop_lists.pkl"
COLLECTION = "hop_memory"
#: One search: (field, the queries' data, params, a filter added to the conversation's or None).
Call = Tuple[str, List[Any], Dict[str, Any], Optional[str]]
#: Per question, each query's hits ``[(row id, score)]`` in call order.
HopHits = Dict[Tuple[int, int], List[List[Tuple[str, float]]]]


class Hop:
    """The first ranking from the cached hits, second searches (cached), and the package's steps over both."""

    def __init__(self, w: Widen, rules: RecallRules = DEFAULT, prefix: str = "") -> None:
        self.w, self.st, self.rules, self.prefix = w, w.st, rules, prefix
        self.collection = COLLECTION if rules == DEFAULT else f"{COLLECTION}_ctx{rules.context_before}"
        self.cache: Dict[str, HopHits] = pickle.loads(HOPS.read_bytes()) if HOPS.is_file() else {}
        self.client: Any = None
        self.firsts: Dict[Tuple[int, int], List[int]] = {}

    def first(self, ci: int, qi: int, m: int) -> List[int]:
        """The best m positions of the first ranking (the package's, default rules)."""
        if (ci, qi) not in self.firsts:
            self.firsts[(ci, qi)] = best(self.st.scores(ci, qi, self.w.fused(ci, qi), self.rules), 20)
        return self.firsts[(ci, qi)][:m]

    def searched(self, name: str, calls: Callable[[int, int], List[Call]]) -> HopHits:
        name = self.prefix + name
        if name in self.cache:
            return self.cache[name]
        if self.client is None:
            self.client = indexed(self.st.convs, LocalMiniLMEmbedding(), COLLECTION)[0] if self.rules == DEFAULT \
                else index_with(self.st, self.rules, self.collection)
        out: HopHits = {}
        t0, c0, n = time.perf_counter(), time.process_time(), 0
        for ci, c in enumerate(self.st.convs):
            expr = search_expr(OWNER, f"locomo-{ci}", None)
            for qi in range(len(c["questions"])):
                got: List[List[Tuple[str, float]]] = []
                for field, data, params, extra in calls(ci, qi):
                    if not data:
                        continue
                    n += 1
                    res = self.client.search(self.collection, data=data, anns_field=field, limit=2 * DEFAULT.depth,
                                             filter=expr if extra is None else f"{expr} and {extra}",
                                             search_params=params, output_fields=[])
                    got += [[(str(i), float(d)) for i, d in hit_pairs(hits)] for hits in res]
                out[(ci, qi)] = got
        print(f"searched {name}: {n} calls, {1000 * (time.perf_counter() - t0) / max(n, 1):.1f} ms wall and "
              f"{1000 * (time.process_time() - c0) / max(n, 1):.1f} ms CPU per call (this process, load included)")
        self.cache[name] = out
        HOPS.write_bytes(pickle.dumps(self.cache))
        return out

    def added(self, ci: int, qi: int, found: HopHits, combine: str) -> Dict[int, float]:
        """The second search's score per position in [0, 1]: each query's own and context lists fused (0.5 each),
        then the queries' scores averaged (``mean``) or their maximum (``max``)."""
        per_query = []
        for hits in found[(ci, qi)]:
            lists = split([{"id": i, "distance": d} for i, d in hits], DEFAULT.depth)
            per_query.append({int(k): v for k, v in fusion.weighted([lists[OWN], lists[CONTEXT]], [0.5, 0.5])})
        out: Dict[int, float] = defaultdict(float)
        for scores in per_query:
            for p, v in scores.items():
                out[p] = max(out[p], v) if combine == "max" else out[p] + v / len(per_query)
        return out

    def run(self, name: str, found: Optional[HopHits] = None, weight: float = 0.0, combine: str = "mean",
            rules: Optional[RecallRules] = None, w: Optional[Widen] = None, only_new: bool = False) -> Dict[str, float]:
        """Recall@10 with the second search's scores added at ``weight`` (``only_new``: only to positions the first
        fusion did not keep, so that the hop adds candidates without re-weighting the first ones)."""
        src = w if w is not None else self.w

        def rescore(ci: int, qi: int, _: Dict[int, float]) -> Dict[int, float]:
            fused = src.fused(ci, qi)
            first = set(fused)
            if found is not None and weight > 0:
                for p, v in self.added(ci, qi, found, combine).items():
                    if p < len(self.st.convs[ci]["units"]) and not (only_new and p in first):
                        fused[p] = fused.get(p, 0.0) + weight * v
            return self.st.scores(ci, qi, fused, rules if rules is not None else self.rules)
        return evaluate(self.st.convs, self.st.data, name, rescore=rescore)

    def close(self) -> None:
        if self.client is not None:
            self.client.drop_collection(self.collection)


def index_with(st: Study, rules: RecallRules, name: str) -> Any:
    """A Milvus Lite client holding every conversation indexed with ``rules`` (the default layout's texts from the
    bench's cache; the texts another layout adds embedded while indexing)."""
    model = LocalMiniLMEmbedding()
    texts = sorted({t for c in st.convs for _, own, ctx in unit_texts(c["units"], (), DEFAULT) for t in (own, ctx)})
    vectors = dict(zip(texts, cached_embeddings(model, texts, "locomo").tolist()))
    target = MilvusTarget(uri=str(fresh_dir(name) / "memory.db"))
    client = connect_milvus(target)
    memory = EpisodicMemory.from_defaults(embed_model=TableEmbedding(vectors, model), client=client, target=target,
                                          collection_name=name, rules=rules)
    for c in st.convs:
        memory.index(c["units"])
    return client


#: Weights each second search is added at (``--weights`` replaces them).
WEIGHTS = (0.1, 0.2, 0.3)


def weights() -> Tuple[float, ...]:
    return WEIGHTS


def unit(v: np.ndarray) -> List[float]:
    return (v / np.linalg.norm(v)).tolist()


def study_dense(h: Hop) -> None:
    own, pools = h.st.data["own"], h.st.data["pools"]
    for m in (3, 5):
        found = h.searched(f"dense: each of the best {m}", lambda ci, qi, m=m: [
            (DENSE_FIELD, [own[(ci, p)].tolist() for p in h.first(ci, qi, m)], DENSE_PARAMS, None)])
        for combine in ("mean", "max"):
            for wt in weights():
                h.run(f"+ dense each of best {m}, {combine}, w {wt}", found, wt, combine)
        for b in (0.5, 1.0):
            def rocchio(ci: int, qi: int, m: int = m, b: float = b) -> List[Call]:
                q = pools[(ci, qi)]["qvec"]
                mean = np.mean([own[(ci, p)] for p in h.first(ci, qi, m)], axis=0)
                return [(DENSE_FIELD, [unit(q / np.linalg.norm(q) + b * mean / np.linalg.norm(mean))], DENSE_PARAMS,
                         None)]
            found = h.searched(f"dense: rocchio best {m} b {b}", rocchio)
            for wt in weights():
                h.run(f"+ dense rocchio best {m} b {b}, w {wt}", found, wt)


def study_bm25(h: Hop) -> None:
    convs = h.st.convs
    names = {ci: {w.lower() for u in c["units"] for w in u.speaker.split()} for ci, c in enumerate(convs)}
    for m, n in ((3, 6), (5, 10)):
        def salient(ci: int, qi: int, m: int = m, n: int = n) -> List[Call]:
            units = convs[ci]["units"]
            terms = [t for t in salient_terms(units[p].text for p in h.first(ci, qi, m)) if t.lower() not in names[ci]]
            q = convs[ci]["questions"][qi]["question"]
            return [(SPARSE_FIELD, [q + " " + " ".join(terms[:n])] if terms else [], BM25_PARAMS, None)]
        found = h.searched(f"bm25: question + salient of best {m} ({n})", salient)
        for wt in weights():
            h.run(f"+ bm25 question + salient of best {m} ({n}), w {wt}", found, wt)


def both(vector: Any, text: str, extra: Optional[str]) -> List[Call]:
    return [(DENSE_FIELD, [list(vector)], DENSE_PARAMS, extra), (SPARSE_FIELD, [text], BM25_PARAMS, extra)]


def study_session(h: Hop) -> None:
    convs, pools = h.st.convs, h.st.data["pools"]
    for s in (3, 6):
        def sessions(ci: int, qi: int, s: int = s) -> List[Call]:
            units = convs[ci]["units"]
            sc = h.st.scores(ci, qi, h.w.fused(ci, qi))
            per: Dict[str, List[float]] = defaultdict(list)
            for p, v in sc.items():
                per[units[p].session].append(v)
            mass = {k: sum(sorted(v, reverse=True)[:3]) for k, v in per.items()}
            top = sorted(mass, key=lambda k: -mass[k])[:s]
            extra = "metadata[\"session\"] in [" + ", ".join(quote_string(x) for x in top) + "]"
            return both(pools[(ci, qi)]["qvec"], convs[ci]["questions"][qi]["question"], extra)
        found = h.searched(f"session: the best {s} sessions", sessions)
        for wt in weights():
            h.run(f"+ searches in the best {s} sessions, w {wt}", found, wt)


def study_speaker(h: Hop) -> None:
    convs, pools = h.st.convs, h.st.data["pools"]
    speakers = {ci: sorted({u.speaker for u in c["units"]}) for ci, c in enumerate(convs)}

    def by_speaker(ci: int, qi: int) -> List[Call]:
        q = convs[ci]["questions"][qi]["question"]
        named = named_speaker(q, speakers[ci])
        if named is None:
            return []
        return both(pools[(ci, qi)]["qvec"], q, f"metadata[\"speaker\"] == {quote_string(named)}")
    found = h.searched("speaker: the named speaker's messages", by_speaker)
    for wt in weights() + (0.5,):
        h.run(f"+ searches of the named speaker's messages, w {wt}", found, wt)


def outside_sessions(units: Sequence[Any], positions: Sequence[int]) -> str:
    """A filter keeping the sessions none of ``positions`` is in."""
    got = {units[p].session for p in positions}
    rest = sorted({u.session for u in units} - got)  # Milvus Lite refuses ``not`` over a JSON ``in``
    return "metadata[\"session\"] in [" + ", ".join(quote_string(x) for x in rest) + "]"


def study_other(h: Hop) -> None:
    """Second searches kept out of the sessions the first ranking's best m come from (a list gathered over sessions
    needs its other members, which the first searches rank below the best session's neighbours)."""
    convs, pools, own = h.st.convs, h.st.data["pools"], h.st.data["own"]

    def outside(ci: int, qi: int, m: int) -> str:
        return outside_sessions(convs[ci]["units"], h.first(ci, qi, m))
    for m in (1, 3):
        found = h.searched(f"other: the question outside the sessions of the best {m}", lambda ci, qi, m=m: both(
            pools[(ci, qi)]["qvec"], convs[ci]["questions"][qi]["question"], outside(ci, qi, m)))
        for wt in weights():
            h.run(f"+ the question outside the best {m}'s sessions, w {wt}", found, wt)
    found = h.searched("other: each of the best 3 outside their sessions", lambda ci, qi: [
        (DENSE_FIELD, [own[(ci, p)].tolist() for p in h.first(ci, qi, 3)], DENSE_PARAMS, outside(ci, qi, 3))])
    for combine in ("mean", "max"):
        for wt in weights():
            h.run(f"+ dense each of best 3 outside their sessions, {combine}, w {wt}", found, wt, combine)


def study_words(h: Hop) -> None:
    """A vocabulary hop: the words of the best m that the bridge matched to a query word ("Seattle" for "cities"),
    averaged with it, and the conversation's words nearest that centre (other instances: "Chicago", "Paris"); BM25
    of the question with them (or of them alone)."""
    st = h.st
    uw, qw, vec, convs = st.uw, st.qw, st.vec, st.convs
    vocab = {}
    for ci, c in enumerate(convs):
        ws = sorted({x for u in c["units"] for x in uw[(ci, u.position)] if x in vec})
        vocab[ci] = (ws, np.stack([vec[x] for x in ws]))

    def expansion(ci: int, qi: int, m: int, t: float, n: int) -> List[str]:
        asked = [a for a in qw[(ci, qi)] if a in vec]
        held = {x for p in h.first(ci, qi, m) for x in uw[(ci, p)] if x in vec}
        ws, matrix = vocab[ci]
        out: List[str] = []
        for a in asked:
            bridged = [x for x in held if x != a and float(vec[x] @ vec[a]) >= DEFAULT.bridge_threshold]
            if not bridged:
                continue
            centre = vec[a] + np.mean([vec[x] for x in bridged], axis=0)
            sims = matrix @ (centre / np.linalg.norm(centre))
            skip = set(asked) | set(bridged)
            out += [ws[j] for j in np.argsort(-sims)[:n + len(skip)] if sims[j] >= t and ws[j] not in skip][:n]
        return list(dict.fromkeys(out))

    for m, t, n, alone in ((5, 0.55, 3, False), (5, 0.55, 5, True), (3, 0.6, 3, False)):
        def calls(ci: int, qi: int, m: int = m, t: float = t, n: int = n, alone: bool = alone) -> List[Call]:
            got = expansion(ci, qi, m, t, n)
            q = "" if alone else convs[ci]["questions"][qi]["question"] + " "
            return [(SPARSE_FIELD, [q + " ".join(got)] if got else [], BM25_PARAMS, None)]
        label = f"words: best {m}, cos {t}, {n} per word{', alone' if alone else ''}"
        found = h.searched(label, calls)
        for wt in weights():
            h.run(f"+ {label}, w {wt}", found, wt)


def study_reach(h: Hop) -> None:
    """For every cached second search: of the multi-hop evidence outside the first four lists (every candidate the
    first searches returned), the share its hits hold, and the share in its own best 10; the same for the evidence
    in the lists but outside the pool of 30."""
    convs = h.st.convs
    for name, found in h.cache.items():
        counts = np.zeros(4)
        totals = np.zeros(2)
        for ci, c in enumerate(convs):
            for qi, q in enumerate(c["questions"]):
                if q["category"] != 1:
                    continue
                listed = set(h.w.fused(ci, qi, kept=10 ** 6))
                pool = set(best(h.st.scores(ci, qi, h.w.fused(ci, qi)), 30))
                added = h.added(ci, qi, found, "mean")
                top = set(best(added, 10))
                for e in q["evidence"]:
                    group = 0 if e not in listed else 1 if e not in pool else None
                    if group is None:
                        continue
                    totals[group] += 1
                    counts[2 * group] += e in added
                    counts[2 * group + 1] += e in top
        print(f"{name:58s} outside the lists ({totals[0]:.0f}): hit {counts[0] / totals[0]:.3f}, its top 10 "
              f"{counts[1] / totals[0]:.3f} | listed, outside the pool ({totals[1]:.0f}): "
              f"hit {counts[2] / totals[1]:.3f},"
              f" its top 10 {counts[3] / totals[1]:.3f}")


def study_new(h: Hop) -> None:
    """The cached second searches added to new candidates only (those the first fusion did not keep)."""
    for name in list(h.cache):
        for wt in weights():
            h.run(f"+ {name}, new candidates only, w {wt}", h.cache[name], wt, only_new=True)


def study_context(h: Hop) -> None:
    """``context_before=2`` (second spread off) with a second hop: the first ranking and the second searches over
    the conversations indexed so."""
    rules = RecallRules(context_before=2, second_spread=0.0)
    two = Hop(Widen(h.st, searched(h.st, 2)), rules, prefix="ctx2: ")
    two.cache = h.cache
    own = h.st.data["own"]
    two.run("context_before=2, second spread off")
    try:
        found = two.searched("dense: each of the best 3", lambda ci, qi: [
            (DENSE_FIELD, [own[(ci, p)].tolist() for p in two.first(ci, qi, 3)], DENSE_PARAMS, None)])
        for wt in (0.1, 0.2):
            two.run(f"ctx2 + dense each of best 3, mean, w {wt}", found, wt)
            two.run(f"ctx2 + dense each of best 3, mean, new only, w {wt}", found, wt, only_new=True)
        convs = h.st.convs
        found = two.searched("other: each of the best 3 outside their sessions", lambda ci, qi: [
            (DENSE_FIELD, [own[(ci, p)].tolist() for p in two.first(ci, qi, 3)], DENSE_PARAMS,
             outside_sessions(convs[ci]["units"], two.first(ci, qi, 3)))])
        for wt in (0.1, 0.2):
            two.run(f"ctx2 + dense each of best 3 outside their sessions, w {wt}", found, wt)
    finally:
        two.close()


def main() -> int:
    global WEIGHTS
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", default="speaker,session,dense,bm25,other,words,reach,new,context")
    ap.add_argument("--weights", default=",".join(map(str, WEIGHTS)), help="weights of the second searches")
    args = ap.parse_args()
    WEIGHTS = tuple(float(x) for x in args.weights.split(","))
    st = Study()
    h = Hop(Widen(st, searched(st, 1)))
    h.run("default (from the cached hits)")
    studies = {"dense": study_dense, "bm25": study_bm25, "session": study_session, "speaker": study_speaker,
               "other": study_other, "words": study_words, "reach": study_reach, "new": study_new,
               "context": study_context}
    try:
        for name in args.studies.split(","):
            studies[name](h)
    finally:
        h.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
