"""Scratch study: re-scoring steps over episodic recall's candidate pool, on LoCoMo.

Each question's four lists are searched once as the package searches them (``episodic_search``'s two calls and
fusion, the default ``RecallRules``, Milvus Lite) and cached (``bench/out/recall_pool.pkl``); the variants then re-score the cached pool in
Python, in seconds. The baseline is the package's ranking before the bridge step (spread, then the speaker step);
its figures equal ``bench/memory_recall.py``'s "+ named speaker" row. Recall@10 of the evidence per half (tune =
conversations 0-2, check = 3-4) and category, and multi-hop per half.

* ``pools``: recall@N over deeper pools (what any re-scoring of them could reach);
* ``dense``: a second dense score over the pool (the question's content words as one phrase, the whole question,
  each content word alone: max or mean), added at weight lam;
* ``time-diversity``: "when" questions raising messages with time words; a soft per-session discount for list
  questions or all questions;
* ``bridge``: the vocabulary bridge (:mod:`llama_index_convrag.memory.bridge`) over thresholds and boosts;
* ``deep``: recall@N of deeper pools, the bridge over pools of 30 to 100, pseudo-relevance feedback (the query vector
  moved toward the mean of the best m candidates, Rocchio-style, as a dense score over the pool);
* ``words``: the bridge's word-length floor, the longest question, query words weighted by their idf in the
  conversation, the bridge as a factor instead of a term.

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/recall_rescore_study.py [--studies pools,dense,time-diversity,bridge,deep,words]
"""

from __future__ import annotations

import pickle
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, cached_embeddings, fresh_dir  # noqa: E402
from memory_recall import CATEGORIES, OWNER, TUNE, TableEmbedding, load_locomo  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.memory.bridge import bridge_scores, query_words, unit_words  # noqa: E402
from llama_index_convrag.memory.episodic import EpisodicMemory, unit_texts  # noqa: E402
from llama_index_convrag.memory.episodic_search import rank, search_calls, search_expr  # noqa: E402
from llama_index_convrag.memory.rules import RecallRules, best, boost_speaker, named_speaker, spread_scores  # noqa: E402
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus  # noqa: E402
from llama_index_convrag.text import stop_words, words  # noqa: E402

CACHE = OUT / "recall_pool.pkl"


def indexed(convs, model, name: str) -> Tuple[Any, EpisodicMemory, Dict[str, List[float]]]:
    """A fresh Milvus Lite client, a memory (default rules) holding every conversation in collection ``name``, and
    the unit texts' vectors (cached on disk)."""
    texts = sorted({t for c in convs for _, own, ctx in unit_texts(c["units"], (), RecallRules()) for t in (own, ctx)})
    vectors = dict(zip(texts, cached_embeddings(model, texts, "locomo").tolist()))
    folder = fresh_dir(name)
    target = MilvusTarget(uri=str(folder / "memory.db"))
    client = connect_milvus(target)
    memory = EpisodicMemory.from_defaults(embed_model=TableEmbedding(vectors, model), client=client, target=target,
                                          collection_name=name)
    for c in convs:
        memory.index(c["units"])
    return client, memory, vectors


def build() -> Dict[str, Any]:
    convs = load_locomo()
    model = LocalMiniLMEmbedding()
    client, memory, vectors = indexed(convs, model, "study_memory")
    out: Dict[Tuple[int, int], Any] = {}
    t0 = time.perf_counter()
    for ci, c in enumerate(convs):
        expr = search_expr(OWNER, f"locomo-{ci}", None)
        for qi, q in enumerate(c["questions"]):
            qvec = model.get_query_embedding(q["question"])
            dense, bm25 = [client.search(*call.args, **call.kwargs)
                           for call in search_calls("study_memory", expr, qvec, q["question"], memory.rules)]
            ranking = rank(dense[0], bm25[0], memory.rules)
            fused = {int(key): score for key, score in ranking.kept}
            lists = {stage: {int(k): v for k, v in pos.items()} for stage, pos in ranking.stages}
            out[(ci, qi)] = {"fused": fused, "lists": lists, "qvec": np.asarray(qvec, dtype=np.float32)}
    print(f"searched {len(out)} questions in {time.perf_counter() - t0:.0f} s")
    own = {(ci, u.position): np.asarray(vectors[o], dtype=np.float32)
           for ci, c in enumerate(convs) for u, o, _ in unit_texts(c["units"], (), RecallRules())}
    client.drop_collection("study_memory")
    data = {"pools": out, "own": own}
    CACHE.write_bytes(pickle.dumps(data))
    return data


def load() -> Dict[str, Any]:
    return pickle.loads(CACHE.read_bytes()) if CACHE.is_file() else build()


Rescore = Callable[[int, int, Dict[int, float]], Dict[int, float]]


BEFORE_BRIDGE = RecallRules(second_spread=0.0, bridge_boost=0.0)  # the rules this study was run on, less the bridge


def baseline_scores(convs, data, ci, qi, rules: RecallRules) -> Dict[int, float]:
    """What ``finish_recall`` ranks: the spread scores of the pool, after the speaker step."""
    entry = data["pools"][(ci, qi)]
    spread = spread_scores(entry["fused"], rules)
    units = convs[ci]["units"]
    n = len(units)
    pool = [p for p in best({p: s for p, (s, _) in spread.items() if p < n}, rules.pool(10))]
    speakers = {p: units[p].speaker for p in pool}
    named = named_speaker(convs[ci]["questions"][qi]["question"], speakers.values())
    return boost_speaker({p: spread[p][0] for p in pool}, speakers, named, rules.speaker_boost)


def evaluate(convs, data, name: str, rescore: Rescore = None, k: int = 10, rules: RecallRules = BEFORE_BRIDGE,
             quiet: bool = False) -> Dict[str, float]:
    acc: Dict[Tuple[str, Any], List[float]] = defaultdict(list)
    for ci, c in enumerate(convs):
        half = "tune" if ci in TUNE else "check"
        for qi, q in enumerate(c["questions"]):
            scores = baseline_scores(convs, data, ci, qi, rules)
            if rescore is not None:
                scores = rescore(ci, qi, scores)
            got = best(scores, k)
            r = len(q["evidence"] & set(got)) / len(q["evidence"])
            for h in ("all", half):
                acc[(h, "all")].append(r)
                acc[(h, q["category"])].append(r)
    m = {f"{h}/{c}": float(np.mean(v)) for (h, c), v in acc.items()}
    if not quiet:
        cats = " ".join(f"{CATEGORIES[c][:5]} {m[f'all/{c}']:.3f}" for c in sorted(CATEGORIES))
        print(f"{name:44s} all {m['all/all']:.3f} tune {m['tune/all']:.3f} check {m['check/all']:.3f} "
              f"mh {m['tune/1']:.3f}/{m['check/1']:.3f} | {cats}")
    return m


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", default="pools,dense,time-diversity,bridge,deep,words")
    args = ap.parse_args()
    convs = load_locomo()
    data = load()
    evaluate(convs, data, "baseline (rules before the bridge)")
    evaluate(convs, data, "oracle@30 (the pool the steps re-score)", k=30)
    studies = {"words-cost": study_words_cost, "expand": study_expand, "maxsim": study_maxsim, "words": study_words, "deep": study_deep, "pools": study_pools, "dense": study_dense, "time-diversity": study_time_diversity, "bridge": study_bridge}
    for name in args.studies.split(","):
        studies[name](convs, data)
    return 0


# -- variants ---------------------------------------------------------------------------------------------------

QWORDS = {"what", "which", "who", "when", "where", "how", "why", "did", "does", "do", "has", "have", "had", "is",
          "are", "was", "were", "kind", "kinds", "type", "types", "some", "ways", "things"}


def content_words(query: str, speakers: Sequence[str]) -> List[str]:
    stops = stop_words("en") | QWORDS
    names = {w.lower() for s in speakers for w in words(s)}
    return [w for w in words(query) if w.lower() not in stops and w.lower() not in names and w.isalpha()
            and w.lower() not in {n + "s" for n in names}]


def wide_scores(convs, data, ci, qi, rules: RecallRules, pool: int) -> Dict[int, float]:
    entry = data["pools"][(ci, qi)]
    spread = spread_scores(entry["fused"], rules)
    units = convs[ci]["units"]
    n = len(units)
    keep = best({p: s for p, (s, _) in spread.items() if p < n}, pool)
    speakers = {p: units[p].speaker for p in keep}
    named = named_speaker(convs[ci]["questions"][qi]["question"], speakers.values())
    return boost_speaker({p: spread[p][0] for p in keep}, speakers, named, rules.speaker_boost)


def study_pools(convs, data) -> None:
    for pool in (60, 100, 400):
        evaluate(convs, data, f"oracle@{pool} over all candidates", k=pool,
                 rescore=lambda ci, qi, s, pool=pool: wide_scores(convs, data, ci, qi, BEFORE_BRIDGE, pool))


def study_dense(convs, data) -> None:
    model = LocalMiniLMEmbedding()
    # content phrase of each question (its words less stop/question words and the speakers' names)
    speakers = {ci: sorted({u.speaker for u in c["units"]}) for ci, c in enumerate(convs)}
    phrases = {(ci, qi): " ".join(content_words(q["question"], speakers[ci]))
               for ci, c in enumerate(convs) for qi, q in enumerate(c["questions"])}
    texts = sorted(set(phrases.values()) - {""})
    pvec = dict(zip(texts, cached_embeddings(model, texts, "locomo_phrases")))
    wtexts = sorted({w.lower() for p in phrases.values() for w in p.split()})
    wvec = dict(zip(wtexts, cached_embeddings(model, wtexts, "locomo_qwords")))
    own = data["own"]

    def phrase_rescore(lam: float, pool: int, mode: str):
        def f(ci, qi, s):
            s = wide_scores(convs, data, ci, qi, BEFORE_BRIDGE, pool) if pool else s
            ph = phrases[(ci, qi)]
            if not ph:
                return s
            ps = list(s)
            V = np.stack([own[(ci, p)] for p in ps])
            if mode == "phrase":
                sim = V @ pvec[ph]
            elif mode == "query":
                sim = V @ data["pools"][(ci, qi)]["qvec"]
            else:  # max over single words
                W = np.stack([wvec[w.lower()] for w in ph.split()])
                sim = (V @ W.T).max(axis=1) if mode == "wmax" else (V @ W.T).mean(axis=1)
            lo, hi = sim.min(), sim.max()
            z = (sim - lo) / (hi - lo) if hi > lo else np.zeros_like(sim)
            return {p: s[p] + lam * float(z[i]) for i, p in enumerate(ps)}
        return f

    for mode in ("phrase", "query", "wmax", "wmean"):
        for pool in (0, 60):
            for lam in (0.2, 0.4, 0.8):
                evaluate(convs, data, f"{mode} pool {pool or 30} lam {lam}", rescore=phrase_rescore(lam, pool, mode))



TIME_WORDS = re.compile(r"\b(yesterday|today|tonight|tomorrow|ago|last|next|this|recently|weekend|week|month|year|"
                        r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|"
                        r"june|july|august|september|october|november|december|\d{4})\b", re.I)
LIST_Q = re.compile(r"^(what|which) (\w+ ){0,3}\w+s\b|^what are\b|^how many\b|\bboth\b", re.I)


def study_time_diversity(convs, data) -> None:
    units = {ci: c["units"] for ci, c in enumerate(convs)}

    def temporal(boost: float):
        def f(ci, qi, s):
            q = convs[ci]["questions"][qi]["question"]
            if not re.match(r"\s*when\b", q, re.I):
                return s
            return {p: v * (1 + boost) if TIME_WORDS.search(units[ci][p].text) else v for p, v in s.items()}
        return f

    for b in (0.1, 0.2, 0.4):
        evaluate(convs, data, f"when -> time words x{1 + b}", rescore=temporal(b))

    def diverse(delta: float, listonly: bool, pool: int = 0):
        def f(ci, qi, s):
            q = convs[ci]["questions"][qi]["question"]
            if listonly and not LIST_Q.search(q):
                return s
            if pool:
                s = wide_scores(convs, data, ci, qi, BEFORE_BRIDGE, pool)
            left, out, seen = dict(s), {}, defaultdict(int)
            rank = 0
            while left:
                p = max(left, key=lambda x: (left[x] * (1 - delta) ** seen[units[ci][x].session], x))
                out[p] = 1e6 - rank
                rank += 1
                seen[units[ci][p].session] += 1
                del left[p]
            return out
        return f

    n_list = sum(bool(LIST_Q.search(q["question"])) for c in convs for q in c["questions"])
    n_list_mh = sum(bool(LIST_Q.search(q["question"])) for c in convs for q in c["questions"] if q["category"] == 1)
    print(f"list questions: {n_list} of which multi-hop {n_list_mh}")
    for d in (0.1, 0.2, 0.3):
        for lo in (True, False):
            evaluate(convs, data, f"soft session diversity {d} {'list q only' if lo else 'all q'}",
                     rescore=diverse(d, lo))
        evaluate(convs, data, f"soft session diversity {d} list q, pool 60", rescore=diverse(d, True, 60))



def study_bridge(convs, data) -> None:
    """The package's bridge step (its word lists and scores), single words embedded once (cached on disk)."""
    uw, qw, vec = bridge_table(convs)
    print(f"vocabulary: {len(vec)} words")

    def bridge(t: float, b: float):
        def f(ci, qi, s):
            got = bridge_scores(s, qw[(ci, qi)], {p: uw[(ci, p)] for p in s}, vec,
                                RecallRules(bridge_threshold=t, bridge_boost=b))
            return {p: v["score"] for p, v in got.items()}
        return f

    for t in (0.45, 0.5, 0.55, 0.6, 0.7):
        for b in (0.2, 0.4, 0.6, 0.8):
            evaluate(convs, data, f"bridge threshold {t} boost {b}", rescore=bridge(t, b))



def bridge_table(convs, model=None):
    """Words of every unit and question, and their unit vectors (cached on disk)."""
    model = model if model is not None else LocalMiniLMEmbedding()
    speakers = {ci: sorted({u.speaker for u in c["units"]}) for ci, c in enumerate(convs)}
    uw = {(ci, u.position): unit_words(u.text, RecallRules(), "en") for ci, c in enumerate(convs) for u in c["units"]}
    qw = {(ci, qi): query_words(q["question"], speakers[ci], RecallRules(), "en")
          for ci, c in enumerate(convs) for qi, q in enumerate(c["questions"])}
    vocab = sorted({w for ws in list(uw.values()) + list(qw.values()) for w in ws})
    raw = cached_embeddings(model, vocab, "locomo_bridge_words")
    vec = dict(zip(vocab, raw / np.linalg.norm(raw, axis=1, keepdims=True)))
    return uw, qw, vec


def study_deep(convs, data) -> None:
    """Deeper pools with the bridge; pseudo-relevance feedback over the pool; idf-weighted bridge."""
    uw, qw, vec = bridge_table(convs)
    own = data["own"]
    for pool in (30, 60, 100):
        evaluate(convs, data, f"oracle@{pool} (mh in row)", k=pool,
                 rescore=lambda ci, qi, s, pool=pool: wide_scores(convs, data, ci, qi, BEFORE_BRIDGE, pool))

    def bridged(ci, qi, s, t=0.5, b=0.4):
        got = bridge_scores(s, qw[(ci, qi)], {p: uw[(ci, p)] for p in s}, vec, RecallRules(bridge_threshold=t, bridge_boost=b))
        return {p: v["score"] for p, v in got.items()}

    for pool in (30, 45, 60, 100):
        for b in (0.4, 0.6):
            evaluate(convs, data, f"bridge pool {pool} boost {b}",
                     rescore=lambda ci, qi, s, pool=pool, b=b: bridged(
                         ci, qi, wide_scores(convs, data, ci, qi, BEFORE_BRIDGE, pool), b=b))

    def prf(pool: int, m: int, lam: float, with_bridge: bool, beta: float):
        def f(ci, qi, s):
            s = wide_scores(convs, data, ci, qi, BEFORE_BRIDGE, pool)
            if with_bridge:
                s = bridged(ci, qi, s)
            ps = list(s)
            top = best(s, m)
            centroid = np.mean([own[(ci, p)] for p in top], axis=0)
            qv = data["pools"][(ci, qi)]["qvec"]
            probe = qv / np.linalg.norm(qv) + beta * centroid / np.linalg.norm(centroid)
            V = np.stack([own[(ci, p)] for p in ps])
            sim = V @ probe
            lo, hi = sim.min(), sim.max()
            z = (sim - lo) / (hi - lo) if hi > lo else np.zeros_like(sim)
            return {p: s[p] + lam * float(z[i]) for i, p in enumerate(ps)}
        return f

    for pool in (30, 60):
        for m in (3, 5):
            for lam in (0.2, 0.4):
                for beta in (0.5, 1.0):
                    evaluate(convs, data, f"prf+bridge pool {pool} m {m} lam {lam} beta {beta}",
                             rescore=prf(pool, m, lam, True, beta))




def study_words(convs, data) -> None:
    """The bridge's word-length floor and query-word weighting (idf over the conversation's messages)."""
    import math

    model = LocalMiniLMEmbedding()
    uw, qw, vec = bridge_table(convs, model)
    speakers = {ci: sorted({u.speaker for u in c["units"]}) for ci, c in enumerate(convs)}
    stops = stop_words("en")
    names = {ci: {w.lower() for s in speakers[ci] for w in words(s)} for ci in speakers}

    def floor_words(text, n, skip=()):
        out = {}
        for w in words(text):
            low = w.lower()
            if len(low) >= n and low.isalpha() and low not in stops and low not in skip:
                out[low] = None
        return list(out)

    short = sorted({w.lower() for c in convs for u in c["units"] for w in words(u.text)
                    if len(w) == 2 and w.isalpha() and w.lower() not in stops})
    raw = cached_embeddings(model, short, "locomo_bridge_short")
    vec2 = dict(vec, **dict(zip(short, raw / np.linalg.norm(raw, axis=1, keepdims=True))))
    for n in (2, 3, 4, 5):
        uwn = {(ci, u.position): floor_words(u.text, n) for ci, c in enumerate(convs) for u in c["units"]}
        qwn = {(ci, qi): floor_words(q["question"], n, names[ci] | {x + "s" for x in names[ci]})
               for ci, c in enumerate(convs) for qi, q in enumerate(c["questions"])}
        missing = {w for ws in list(uwn.values()) + list(qwn.values()) for w in ws} - set(vec2)

        def f(ci, qi, s, uwn=uwn, qwn=qwn):
            got = bridge_scores(s, qwn[(ci, qi)], {p: uwn[(ci, p)] for p in s}, vec2, RecallRules())
            return {p: v["score"] for p, v in got.items()}
        evaluate(convs, data, f"bridge floor {n} chars ({len(missing)} words unseen)", rescore=f)
    longest = max(len(v) for v in qw.values())
    print(f"query content words: longest {longest}, mean {np.mean([len(v) for v in qw.values()]):.1f}")

    df = {ci: defaultdict(int) for ci in range(len(convs))}
    for (ci, p), ws in uw.items():
        for w in set(ws):
            df[ci][w] += 1

    def weighted(ci, qi, s, b=0.4, t=0.5):
        q = [w for w in qw[(ci, qi)] if w in vec]
        if not q:
            return s
        n = len(convs[ci]["units"])
        wts = np.asarray([math.log((n + 1) / (df[ci].get(w, 0) + 1)) for w in q])
        wts = wts / wts.sum() if wts.sum() > 0 else np.full(len(q), 1 / len(q))
        Q = np.stack([vec[w] for w in q])
        out = {}
        for p, v in s.items():
            ws = [w for w in uw[(ci, p)] if w in vec]
            if not ws:
                out[p] = v
                continue
            near = (np.stack([vec[w] for w in ws]) @ Q.T).max(axis=0) >= t
            out[p] = v + b * float(wts[near].sum())
        return out

    for b in (0.4, 0.6):
        evaluate(convs, data, f"idf-weighted bridge boost {b}", rescore=lambda ci, qi, s, b=b: weighted(ci, qi, s, b))

    def mult(ci, qi, s, b):
        got = bridge_scores(s, qw[(ci, qi)], {p: uw[(ci, p)] for p in s}, vec, RecallRules(bridge_boost=1.0))
        return {p: s[p] * (1 + b * got[p]["share"]) for p in s}

    for b in (0.3, 0.5, 0.8):
        evaluate(convs, data, f"multiplicative bridge x(1+{b} share)", rescore=lambda ci, qi, s, b=b: mult(ci, qi, s, b))




def study_maxsim(convs, data) -> None:
    """Late interaction over single words (ColBERT-style MaxSim: each query word's best cosine among a candidate's
    words, averaged) as a continuous score beside the thresholded bridge; and where the missed multi-hop evidence
    ranks."""
    uw, qw, vec = bridge_table(convs)
    rules = RecallRules()

    def bridged(ci, qi, s):
        got = bridge_scores(s, qw[(ci, qi)], {p: uw[(ci, p)] for p in s}, vec, rules)
        return {p: v["score"] for p, v in got.items()}

    ranks = []
    for ci, c in enumerate(convs):
        for qi, q in enumerate(c["questions"]):
            if q["category"] != 1:
                continue
            s = bridged(ci, qi, wide_scores(convs, data, ci, qi, BEFORE_BRIDGE, 400))
            order = best(s, len(s))
            ranks += [order.index(e) if e in order else 999 for e in q["evidence"]]
    r = np.asarray(ranks)
    print(f"multi-hop evidence ranks after the bridge: <10 {np.mean(r < 10):.3f}, 10-29 {np.mean((r >= 10) & (r < 30)):.3f}, "
          f"30-59 {np.mean((r >= 30) & (r < 60)):.3f}, 60-399 {np.mean((r >= 60) & (r < 400)):.3f}, absent {np.mean(r == 999):.3f}")

    def maxsim(pool, lam, power):
        def f(ci, qi, s):
            s = bridged(ci, qi, wide_scores(convs, data, ci, qi, BEFORE_BRIDGE, pool))
            q = [w for w in qw[(ci, qi)] if w in vec]
            if not q:
                return s
            Q = np.stack([vec[w] for w in q])
            out = {}
            for p, v in s.items():
                ws = [w for w in uw[(ci, p)] if w in vec]
                m = float(np.mean(np.clip((np.stack([vec[w] for w in ws]) @ Q.T).max(axis=0), 0, 1) ** power)) if ws else 0.0
                out[p] = v + lam * m
            return out
        return f

    for pool in (30, 60):
        for lam in (0.2, 0.4, 0.8):
            for power in (1, 3):
                evaluate(convs, data, f"bridge + maxsim pool {pool} lam {lam} pow {power}", rescore=maxsim(pool, lam, power))




def study_expand(convs, data) -> None:
    """BM25 query expansion by the bridge's single-word vectors, without another search: the conversation's words
    within cosine t of a query content word (the m nearest per query word) join the BM25 query text; the dense
    query is unchanged. Searches again (Milvus Lite) per setting; then the default re-scoring (speaker, bridge)."""
    convs_ = convs
    uw, qw, vec = bridge_table(convs_)
    client, memory, _ = indexed(convs_, LocalMiniLMEmbedding(), "expand_memory")
    rules = RecallRules()
    conv_vocab = {}
    for ci, c in enumerate(convs_):
        ws = sorted({w for u in c["units"] for w in uw[(ci, u.position)] if w in vec})
        conv_vocab[ci] = (ws, np.stack([vec[w] for w in ws]))

    def expansion(ci, qi, t, m):
        ws, V = conv_vocab[ci]
        extra = []
        for w in qw[(ci, qi)]:
            if w not in vec:
                continue
            sims = V @ vec[w]
            order = np.argsort(-sims)
            extra += [ws[j] for j in order[: m + 1] if sims[j] >= t and ws[j] != w][:m]
        return list(dict.fromkeys(extra))

    qvecs = {key: entry["qvec"] for key, entry in data["pools"].items()}
    import os
    settings = [tuple(float(x) if i == 0 else int(x) for i, x in enumerate(v.split(":")))
                for v in os.environ.get("EXPAND", "1.1:0:1,0.6:3:1,0.5:3:1,0.5:8:1,0.45:5:1").split(",")]
    for t, m, rep in settings:
        pools = {}
        n_extra = []
        t0 = time.process_time()
        for ci, c in enumerate(convs_):
            expr = search_expr(OWNER, f"locomo-{ci}", None)
            for qi, q in enumerate(c["questions"]):
                extra = expansion(ci, qi, t, m) if m else []
                n_extra.append(len(extra))
                text = " ".join([q["question"]] * rep) + (" " + " ".join(extra) if extra else "")
                dense, bm25 = [client.search(*call.args, **call.kwargs)
                               for call in search_calls("expand_memory", expr, qvecs[(ci, qi)], text, rules)]
                ranking = rank(dense[0], bm25[0], rules)
                pools[(ci, qi)] = {"fused": {int(key): score for key, score in ranking.kept}}
        spent = time.process_time() - t0
        view = {"pools": pools}

        def f(ci, qi, s, view=view):
            s = baseline_scores(convs_, view, ci, qi, BEFORE_BRIDGE)
            got = bridge_scores(s, qw[(ci, qi)], {p: uw[(ci, p)] for p in s}, vec, rules)
            return {p: v["score"] for p, v in got.items()}
        evaluate(convs_, view, f"expand BM25 t {t} m {m} question x{rep} (mean {np.mean(n_extra):.1f} words; {spent:.0f} s CPU)",
                 rescore=f)
        evaluate(convs_, view, f"   oracle@30 of it", k=30)
    client.drop_collection("expand_memory")




def study_words_cost(convs, data) -> None:
    """CPU of the bridge's word lists per recall, side by side (alternating rounds): the query's language identified
    (the default; identification cache cleared each round, as for a query no earlier step identified) against the
    language given ("en", the earlier English-only lists); both read the candidates' words uncached."""
    from llama_index_convrag.memory import bridge as bridge_module
    from llama_index_convrag.text import identify as ident

    rules = RecallRules()
    speakers = {ci: sorted({u.speaker for u in c["units"]}) for ci, c in enumerate(convs)}
    jobs = []
    for ci, c in enumerate(convs):
        for qi, q in enumerate(c["questions"][:40]):
            pool = best(baseline_scores(convs, data, ci, qi, BEFORE_BRIDGE), 30)
            jobs.append((q["question"], {p: c["units"][p].text for p in pool}, speakers[ci]))

    def given(query, texts, names):
        q = query_words(query, names, rules, "en")
        return q, {p: unit_words(t, rules, "en") for p, t in texts.items()}

    arms = {"identified": lambda query, texts, names: bridge_module.pool_words(query, texts, names, rules),
            "given (en)": given}
    cpu = {name: [] for name in arms}
    for rnd in range(6):
        for name in (list(arms) if rnd % 2 == 0 else list(arms)[::-1]):
            ident.cache_clear()
            bridge_module._content_words.cache_clear()
            c0 = time.process_time()
            for job in jobs:
                arms[name](*job)
            cpu[name].append((time.process_time() - c0) * 1000 / len(jobs))
    import os
    med = {name: float(np.median(v)) for name, v in cpu.items()}
    print(f"bridge word lists per recall ({len(jobs)} questions x 30 candidates, 6 alternating rounds, load average "
          f"{os.getloadavg()[0]:.1f}): identified {med['identified']:.2f} ms CPU, given {med['given (en)']:.2f} ms "
          f"CPU, difference {med['identified'] - med['given (en)']:+.2f} ms")
    texts = [u.text for u in convs[0]["units"][:200]]
    pairs = [texts[i:i + 2] for i in range(0, len(texts), 2)]
    rounds = {"identified": [], "given (en)": []}
    for rnd in range(6):
        for name in (list(rounds) if rnd % 2 == 0 else list(rounds)[::-1]):
            ident.cache_clear()
            bridge_module._content_words.cache_clear()
            c0 = time.process_time()
            for pair in pairs:
                if name == "identified":
                    bridge_module.batch_words(pair, rules)
                else:
                    list(dict.fromkeys(w for t in pair for w in unit_words(t, rules, "en")))
            rounds[name].append((time.process_time() - c0) * 1000 / len(pairs))
    med = {name: float(np.median(v)) for name, v in rounds.items()}
    print(f"bridge words of a written turn (2 messages, {len(pairs)} turns): identified {med['identified']:.2f} ms "
          f"CPU, given {med['given (en)']:.2f} ms CPU, difference {med['identified'] - med['given (en)']:+.2f} ms")


if __name__ == "__main__":
    raise SystemExit(main())
