"""Scratch study: how episodic recall chooses its final k from the scored pool, on LoCoMo.

Over the cached searches of ``bench/recall_widen_study.py`` (``bench/out/recall_hits_ctx1.pkl``) each question's
pool is scored as the package scores it (the steps of ``bench/recall_multihop_study.py``'s ``Study.scores``:
spread, the pool, the speaker step, the bridge; the scores before the bridge are kept too); the variants below then
choose the k (10) from that pool greedily instead of taking the best k. Recall@10 of the evidence per half (tune =
conversations 0-2, check = 3-4), per category (tune / check), multi-hop per half, and the questions whose recall
the variant raised / lowered against the default, per half:

* ``runs``: where the default's top 10 lie (runs of adjacent positions, sessions) and the oracle of the pool;
* ``mmr``: maximal marginal relevance over the messages' own vectors (lambda x score / best - (1 - lambda) x the
  highest cosine to a chosen message);
* ``decay``: a candidate's score x (1 - d) per chosen message within ``reach`` positions of it (a run of adjacent
  messages), or per chosen message of its session;
* ``cover``: query-aspect coverage: the bridge's term counted over the query words not yet covered by the chosen
  messages (a covered word weighs 1 - d);
* ``adaptive``: the run decay scaled by how flat the pool's scores are (the k-th best over the best);
* ``wide``: the same choices from a pool of 60;
* ``explain``: candidates the bridge gave nothing (no word near a query word) lowered, alone or only next to a
  chosen message; the part of a score inherited from a chosen message cut (it is explained);
* ``more``: a candidate holding a capitalised word past a sentence's start (a name, a title) raised; MMR with word
  overlap (and scaled by flatness); the first slots one per session;
* ``shape``: the bridge's term as a power of the share, a bonus for every query word covered, both tails;
* ``ctx2``: some of them over context rows of the two messages before (re-indexed once, cached).

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/recall_select_study.py [--studies NAMES]

NAMES: study names joined by commas; every one but ``ctx2`` by default.
"""

from __future__ import annotations

import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_recall import CATEGORIES, TUNE  # noqa: E402
from recall_multihop_study import DEFAULT, Study  # noqa: E402
from recall_widen_study import Widen, searched  # noqa: E402

from llama_index_convrag.memory.bridge import bridge_scores  # noqa: E402
from llama_index_convrag.memory.rules import (  # noqa: E402
    RecallRules, best, boost_speaker, named_speaker, spread_scores)

K = 10
#: A chooser: (conversation, question, the pool's final scores, the pool's scores before the bridge) -> the k.
Chooser = Callable[[int, int, Dict[int, float], Dict[int, float]], List[int]]


class Select:
    """Each question's scored pool (as the package scores it) and the recall@10 of a chooser over it."""

    def __init__(self, st: Study, w: Widen, rules: RecallRules = DEFAULT) -> None:
        self.st, self.w, self.rules = st, w, rules
        self.units = {ci: c["units"] for ci, c in enumerate(st.convs)}
        self._pools: Dict[Tuple[int, int, int], Tuple[Dict[int, float], Dict[int, float]]] = {}
        self.rows: List[Tuple[str, Dict[str, float]]] = []
        self._base: Dict[Tuple[int, int], float] = {}

    def pool(self, ci: int, qi: int, size: int) -> Tuple[Dict[int, float], Dict[int, float]]:
        """The pool of ``size``: its final scores and its scores before the bridge (after the speaker step)."""
        key = (ci, qi, size)
        if key not in self._pools:
            st, units = self.st, self.units[ci]
            fused = self.w.fused(ci, qi)
            sc = {p: s for p, (s, _) in spread_scores(fused, self.rules).items() if p < len(units)}
            kept = best(sc, size)
            speakers = {p: units[p].speaker for p in kept}
            named = named_speaker(st.convs[ci]["questions"][qi]["question"], speakers.values())
            before = boost_speaker({p: sc[p] for p in kept}, speakers, named, self.rules.speaker_boost)
            got = bridge_scores(before, st.qw[(ci, qi)], {p: st.uw[(ci, p)] for p in before}, st.vec,
                                self.rules)
            self._pools[key] = ({p: v["score"] for p, v in got.items()}, before)
        return self._pools[key]

    def run(self, name: str, choose: Optional[Chooser] = None, size: int = 30) -> Dict[str, float]:
        acc: Dict[Tuple[str, object], List[float]] = defaultdict(list)
        moved: Counter = Counter()
        for ci, c in enumerate(self.st.convs):
            half = "tune" if ci in TUNE else "check"
            for qi, q in enumerate(c["questions"]):
                final, before = self.pool(ci, qi, size)
                got = choose(ci, qi, final, before) if choose is not None else best(final, K)
                assert len(got) == min(K, len(final)) and len(set(got)) == len(got), "a chooser must return k"
                r = len(q["evidence"] & set(got)) / len(q["evidence"])
                if (ci, qi) not in self._base:  # the first run (the default) is the baseline
                    self._base[(ci, qi)] = r
                moved[(half, "+" if r > self._base[(ci, qi)] + 1e-9 else "-" if r < self._base[(ci, qi)] - 1e-9
                       else "=")] += 1
                for h in ("all", half):
                    acc[(h, "all")].append(r)
                    acc[(h, q["category"])].append(r)
        m = {f"{h}/{c}": float(np.mean(v)) for (h, c), v in acc.items()}
        cats = " ".join(f"{CATEGORIES[c][:5]} {m[f'tune/{c}']:.3f}/{m[f'check/{c}']:.3f}"
                        for c in sorted(CATEGORIES) if c != 1)
        print(f"{name:46s} all {m['all/all']:.3f} tune {m['tune/all']:.3f} check {m['check/all']:.3f} "
              f"mh {m['tune/1']:.3f}/{m['check/1']:.3f} | {cats} | questions up/down tune {moved[('tune', '+')]}/"
              f"{moved[('tune', '-')]} check {moved[('check', '+')]}/{moved[('check', '-')]}", flush=True)
        self.rows.append((name, m))
        return m


def greedy_by(candidates: Iterable[int], k: int, value: Callable[[int, List[int]], float]) -> List[int]:
    """The k chosen one at a time: each time the candidate of the highest ``value(candidate, chosen)`` (ties: the
    later position)."""
    left, chosen = set(candidates), []
    while left and len(chosen) < k:
        p = max(left, key=lambda x: (value(x, chosen), x))
        chosen.append(p)
        left.discard(p)
    return chosen


def greedy(scores: Dict[int, float], k: int, factor: Callable[[int, List[int]], float]) -> List[int]:
    """:func:`greedy_by` on the score x ``factor(candidate, chosen)``."""
    return greedy_by(scores, k, lambda x, chosen: scores[x] * factor(x, chosen))


def study_runs(s: Select) -> None:
    """Where the default's top 10 lie, and the oracle of the pool (any choice of 10 from it)."""
    runs, sessions, adjacent = Counter(), Counter(), 0
    ev_top, ev_pool = Counter(), Counter()
    for ci, c in enumerate(s.st.convs):
        for qi, q in enumerate(c["questions"]):
            final, _ = s.pool(ci, qi, 30)
            top = sorted(best(final, K))
            n_runs = 1 + sum(1 for a, b in zip(top, top[1:]) if b - a > 1)
            runs[n_runs] += 1
            sessions[len({s.units[ci][p].session for p in top})] += 1
            adjacent += sum(1 for a, b in zip(top, top[1:]) if b - a == 1)
            if q["category"] == 1:
                ev_top[len({s.units[ci][p].session for p in q["evidence"] & set(top)})] += 1
                ev_pool[len({s.units[ci][p].session for p in q["evidence"] & set(final)})] += 1
    n = sum(runs.values())
    print(f"top 10: runs of adjacent positions (mean) {sum(k * v for k, v in runs.items()) / n:.2f}, sessions "
          f"(mean) {sum(k * v for k, v in sessions.items()) / n:.2f}, adjacent pairs (mean) {adjacent / n:.2f}")
    print(f"multi-hop: evidence sessions found in the top 10 {dict(sorted(ev_top.items()))}, in the pool of 30 "
          f"{dict(sorted(ev_pool.items()))}")

    def oracle(ci: int, qi: int, final: Dict[int, float], _: Dict[int, float]) -> List[int]:
        ev = s.st.convs[ci]["questions"][qi]["evidence"]
        return sorted(final, key=lambda p: (p not in ev, -final[p]))[:K]
    s.run("oracle: any 10 of the pool of 30", oracle)
    s.run("oracle: any 10 of the pool of 60", oracle, size=60)


def normalised(scores: Dict[int, float]) -> Dict[int, float]:
    top = max(scores.values(), default=1.0) or 1.0
    return {p: v / top for p, v in scores.items()}


def mmr(s: Select, lam: float) -> Chooser:
    own = s.st.data["own"]

    def choose(ci: int, qi: int, final: Dict[int, float], _: Dict[int, float]) -> List[int]:
        rel = normalised(final)
        ps = list(final)
        vec = np.stack([own[(ci, p)] for p in ps])
        vec = vec / np.linalg.norm(vec, axis=1, keepdims=True)
        sim = dict(zip(ps, vec @ vec.T))
        at = {p: i for i, p in enumerate(ps)}
        return greedy_by(ps, K, lambda p, chosen: lam * rel[p] - (1 - lam) * max(
            (sim[p][at[c]] for c in chosen), default=0.0))
    return choose


def study_mmr(s: Select) -> None:
    for lam in (0.95, 0.9, 0.85, 0.8, 0.7):
        s.run(f"MMR own vectors lambda {lam}", mmr(s, lam))


def run_decay(d: float, reach: int) -> Callable[[int, List[int]], float]:
    return lambda p, chosen: (1 - d) ** sum(1 for c in chosen if abs(c - p) <= reach)


def decay_chooser(s: Select, d: float, reach: int, by: str = "run") -> Chooser:
    def choose(ci: int, qi: int, final: Dict[int, float], _: Dict[int, float]) -> List[int]:
        if by == "run":
            return greedy(final, K, run_decay(d, reach))
        units = s.units[ci]
        return greedy(final, K, lambda p, chosen: (1 - d) ** sum(
            1 for c in chosen if units[c].session == units[p].session))
    return choose


def study_decay(s: Select) -> None:
    for reach in (1, 2, 3):
        for d in (0.05, 0.1, 0.2, 0.3):
            s.run(f"run decay: x(1 - {d}) per chosen within {reach}", decay_chooser(s, d, reach))
    for d in (0.05, 0.1, 0.2):
        s.run(f"session decay: x(1 - {d}) per chosen of its session", decay_chooser(s, d, 0, by="session"))


def query_masks(s: Select, ci: int, qi: int, ps: Sequence[int]) -> Tuple[int, Dict[int, List[bool]]]:
    """The query's words (with a vector) and, per candidate, which of them it holds a word near (the bridge's
    test)."""
    st = s.st
    q = [st.vec[w] for w in st.qw[(ci, qi)] if w in st.vec][:DEFAULT.max_query_words]
    if not q:
        return 0, {p: [] for p in ps}
    qm = np.stack(q)
    out = {}
    for p in ps:
        ws = [st.vec[w] for w in st.uw[(ci, p)] if w in st.vec]
        out[p] = list(((np.stack(ws) @ qm.T).max(axis=0) >= DEFAULT.bridge_threshold)) if ws else [False] * len(q)
    return len(q), out


def cover_chooser(s: Select, d: float, boost: float = DEFAULT.bridge_boost) -> Chooser:
    def choose(ci: int, qi: int, final: Dict[int, float], before: Dict[int, float]) -> List[int]:
        n, masks = query_masks(s, ci, qi, list(before))
        if n == 0:
            return best(final, K)
        weight = [1.0] * n
        left, chosen = dict(before), []
        while left and len(chosen) < K:
            def value(p: int) -> Tuple[float, int]:
                return left[p] + boost * sum(wt for wt, hit in zip(weight, masks[p]) if hit) / n, p
            p = max(left, key=value)
            chosen.append(p)
            del left[p]
            weight = [wt * (1 - d) if hit else wt for wt, hit in zip(weight, masks[p])]
        return chosen
    return choose


def study_cover(s: Select) -> None:
    s.run("coverage d 0 (the bridge, recomputed)", cover_chooser(s, 0.0))
    for d in (0.1, 0.2, 0.3, 0.5):
        s.run(f"coverage: a covered word weighs x(1 - {d})", cover_chooser(s, d))
    for b in (0.6, 0.8):
        for d in (0.3, 0.5):
            s.run(f"coverage boost {b}, covered x(1 - {d})", cover_chooser(s, d, b))


def adaptive_chooser(s: Select, d: float, reach: int) -> Chooser:
    def choose(ci: int, qi: int, final: Dict[int, float], _: Dict[int, float]) -> List[int]:
        top = best(final, K)
        flat = final[top[-1]] / final[top[0]] if final[top[0]] > 0 else 0.0
        return greedy(final, K, run_decay(d * flat, reach))
    return choose


def study_adaptive(s: Select) -> None:
    for reach in (1, 2):
        for d in (0.1, 0.2, 0.3, 0.5):
            s.run(f"adaptive run decay {d} x flatness, reach {reach}", adaptive_chooser(s, d, reach))


def study_wide(s: Select) -> None:
    s.run("pool 60, best 10 (no choice)", size=60)
    for lam in (0.9, 0.8):
        s.run(f"pool 60, MMR lambda {lam}", mmr(s, lam), size=60)
    for reach, d in ((1, 0.1), (2, 0.1), (2, 0.2)):
        s.run(f"pool 60, run decay {d} within {reach}", decay_chooser(s, d, reach), size=60)
    s.run("pool 60, coverage d 0.3", cover_chooser(s, 0.3), size=60)


def inherited(s: Select, ci: int, qi: int) -> Dict[int, Dict[int, float]]:
    """Per position: the part of its spread score each neighbour gave it (the default rules' shares)."""
    fused = s.w.fused(ci, qi)
    out: Dict[int, Dict[int, float]] = defaultdict(dict)
    for p, f in fused.items():
        for offset, share in ((1, DEFAULT.forward_spread), (-1, DEFAULT.backward_spread), (2, DEFAULT.second_spread)):
            if share > 0 and p + offset >= 0:
                out[p + offset][p] = share * f
    return out


def unbridged(final: Dict[int, float], before: Dict[int, float]) -> Dict[int, bool]:
    """Per candidate: True when the bridge gave it nothing (it holds no word near a query word)."""
    return {p: final[p] - before[p] <= 1e-9 for p in final}


def gate_chooser(s: Select, g: float) -> Chooser:
    def choose(ci: int, qi: int, final: Dict[int, float], before: Dict[int, float]) -> List[int]:
        none = unbridged(final, before)
        if all(none.values()):
            return best(final, K)
        return best({p: v * (1 - g) if none[p] else v for p, v in final.items()}, K)
    return choose


def near_unbridged_chooser(s: Select, d: float, reach: int) -> Chooser:
    def choose(ci: int, qi: int, final: Dict[int, float], before: Dict[int, float]) -> List[int]:
        none = unbridged(final, before)
        return greedy(final, K, lambda p, chosen: (1 - d) if none[p] and any(
            abs(c - p) <= reach for c in chosen) else 1.0)
    return choose


def explain_chooser(s: Select, d: float, only_unbridged: bool) -> Chooser:
    """Greedy: the part of a candidate's score inherited from a chosen message is cut by d (it was explained)."""
    def choose(ci: int, qi: int, final: Dict[int, float], before: Dict[int, float]) -> List[int]:
        gave = inherited(s, ci, qi)
        none = unbridged(final, before)
        left, chosen = dict(final), []
        while left and len(chosen) < K:
            p = max(left, key=lambda x: (left[x], x))
            chosen.append(p)
            del left[p]
            for q, part in ((q, gave[q].get(p, 0.0)) for q in list(left)):
                if part > 0 and (none[q] or not only_unbridged):
                    left[q] -= d * part
        return chosen
    return choose


def study_explain(s: Select) -> None:
    for g in (0.1, 0.2, 0.3, 0.5):
        s.run(f"unbridged candidates x(1 - {g})", gate_chooser(s, g))
    for reach in (1, 2):
        for d in (0.1, 0.2, 0.3, 0.5):
            s.run(f"unbridged within {reach} of a chosen x(1 - {d})", near_unbridged_chooser(s, d, reach))
    for d in (0.25, 0.5, 1.0):
        for only in (False, True):
            s.run(f"explained: inherited from chosen x(1 - {d}){' unbridged' if only else ''}",
                  explain_chooser(s, d, only))


def mmr_words(s: Select, lam: float, adaptive: bool = False) -> Chooser:
    """MMR with word overlap: redundancy = the highest share of a candidate's content words a chosen message holds
    (``adaptive``: 1 - lambda scaled by the pool's flatness, the k-th best score over the best)."""
    def choose(ci: int, qi: int, final: Dict[int, float], _: Dict[int, float]) -> List[int]:
        rel = normalised(final)
        ws = {p: set(s.st.uw[(ci, p)]) for p in final}
        top = best(final, K)
        mix = 1 - (1 - lam) * (final[top[-1]] / final[top[0]] if adaptive and final[top[0]] > 0 else 1.0)
        return greedy_by(final, K, lambda p, chosen: mix * rel[p] - (1 - mix) * max(
            (len(ws[p] & ws[c]) / len(ws[p]) for c in chosen if ws[p]), default=0.0))
    return choose


def reserve_sessions(s: Select, slots: int) -> Chooser:
    """The best message of each session in turn (sessions by their best score) for the first ``slots``, then the
    best of the rest."""
    def choose(ci: int, qi: int, final: Dict[int, float], _: Dict[int, float]) -> List[int]:
        units, chosen, seen = s.units[ci], [], set()
        for p in best(final, len(final)):
            if len(chosen) >= slots:
                break
            if units[p].session not in seen:
                seen.add(units[p].session)
                chosen.append(p)
        rest = [p for p in best(final, len(final)) if p not in chosen]
        return (chosen + rest)[:K]
    return choose


def specific(text: str, skip: Set[str]) -> bool:
    """Whether ``text`` holds a capitalised word after the first word of a sentence (a name, a title, a place),
    other than "I" and the words of ``skip`` (lower-cased: the question's words and the speakers' names)."""
    for sentence in re.split(r"[.!?]\s+", re.sub(r"\[shares .*?\]", "", text)):
        for w in re.findall(r"[A-Za-z][\w'-]*", sentence)[1:]:
            if w[0].isupper() and w != "I" and not w.startswith("I'") and w.lower() not in skip:
                return True
    return False


def specific_chooser(s: Select, b: float) -> Chooser:
    def choose(ci: int, qi: int, final: Dict[int, float], _: Dict[int, float]) -> List[int]:
        c = s.st.convs[ci]
        names = {w.lower() for u in c["units"] for w in u.speaker.split()}
        asked = {w.lower() for w in re.findall(r"\w+", c["questions"][qi]["question"])}
        skip = names | {n + "'s" for n in names} | asked
        return best({p: v * (1 + b) if specific(c["units"][p].text, skip) else v for p, v in final.items()}, K)
    return choose


def study_more(s: Select) -> None:
    for b in (0.05, 0.1, 0.2, 0.3):
        s.run(f"a name-like word (not the question's) x(1 + {b})", specific_chooser(s, b))
    for lam in (0.95, 0.9, 0.8):
        s.run(f"MMR word overlap lambda {lam}", mmr_words(s, lam))
        s.run(f"MMR word overlap lambda {lam} x flatness", mmr_words(s, lam, adaptive=True))
    for slots in (3, 5, 7):
        s.run(f"first {slots} slots: one per session", reserve_sessions(s, slots))
        s.run(f"pool 60, first {slots} slots: one per session", reserve_sessions(s, slots), size=60)


def shape_chooser(s: Select, boost: float, power: float, whole: float = 0.0) -> Chooser:
    """The bridge's term as ``boost x share ** power`` (+ ``whole`` when the candidate covers every query word)."""
    def choose(ci: int, qi: int, final: Dict[int, float], before: Dict[int, float]) -> List[int]:
        out = {}
        for p, v in before.items():
            share = (final[p] - v) / DEFAULT.bridge_boost
            out[p] = v + boost * share ** power + (whole if share > 1 - 1e-9 else 0.0)
        return best(out, K)
    return choose


def tails_chooser(s: Select, none: float, whole: float) -> Chooser:
    """Both tails of the bridged share: no query word bridged x(1 - ``none``), every one + ``whole``."""
    def choose(ci: int, qi: int, final: Dict[int, float], before: Dict[int, float]) -> List[int]:
        shares = {p: (final[p] - v) / DEFAULT.bridge_boost for p, v in before.items()}
        if max(shares.values(), default=0.0) <= 1e-9:
            return best(final, K)
        return best({p: v * (1 - none) if shares[p] <= 1e-9 else v + (whole if shares[p] > 1 - 1e-9 else 0.0)
                     for p, v in final.items()}, K)
    return choose


def study_shape(s: Select) -> None:
    for none in (0.2, 0.3):
        for whole in (0.1, 0.2):
            s.run(f"unbridged x(1 - {none}), every word + {whole}", tails_chooser(s, none, whole))
    for boost in (0.4, 0.5, 0.6):
        for power in (1.0, 1.5, 2.0, 3.0):
            if (boost, power) != (0.4, 1.0):
                s.run(f"bridge term {boost} x share ** {power}", shape_chooser(s, boost, power))
    for whole in (0.1, 0.2, 0.3):
        s.run(f"bridge 0.4 x share + {whole} when every word", shape_chooser(s, 0.4, 1.0, whole))


def study_ctx2(s: Select) -> None:
    """The same choices over context rows of the two messages before (``context_before=2``, second spread off: the
    variant that gains over all questions on both halves and loses multi-hop on the check half)."""
    two = Select(s.st, Widen(s.st, searched(s.st, 2)), RecallRules(context_before=2, second_spread=0.0))
    two.run("context_before=2, second spread off: best 10")
    two.run("  + a run's decay x(1 - 0.1) within 1", decay_chooser(two, 0.1, 1))
    two.run("  + run decay 0.3 x flatness within 1", adaptive_chooser(two, 0.3, 1))
    two.run("  + MMR word overlap lambda 0.9", mmr_words(two, 0.9))
    two.run("  + unbridged x(1 - 0.3)", gate_chooser(two, 0.3))
    two.run("  + unbridged x 0.7, every word + 0.2", tails_chooser(two, 0.3, 0.2))


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", default="runs,mmr,decay,cover,adaptive,wide,explain,more,shape")
    args = ap.parse_args()
    st = Study()
    s = Select(st, Widen(st, searched(st, 1)))
    s.run("default (best 10 of the pool of 30)")
    studies = {"runs": study_runs, "mmr": study_mmr, "decay": study_decay, "cover": study_cover,
               "adaptive": study_adaptive, "wide": study_wide, "explain": study_explain, "more": study_more,
               "shape": study_shape, "ctx2": study_ctx2}
    for name in args.studies.split(","):
        if name:
            studies[name](s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
