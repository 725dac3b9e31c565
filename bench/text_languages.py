"""The rules in eight languages: the LLM-free rewrite against the raw follow-up, and the extractive answer's fact,
on probe dialogues written for this package (``bench/_language_probes.py``: ten per language).

Per language the ten passages are the corpus. Each dialogue's first question is answered by its passage's first
sentence (shown as the answer); the follow-up is searched as typed (``raw``) and with the contextual rewrite fused
with its own list (``ctx-fuse``, ``conversational.retriever.fuse_ranked``), over hybrid scores emulated in memory:
MiniLM cosine and BM25 over the text layer's terms (the terms Milvus' analyzers index), each min-max normalised,
0.5 / 0.5. ``first`` counts follow-ups whose passage is ranked first. ``fact`` counts, of the follow-ups whose
passage the contextual rewrite ranks first, those whose extractive answer (``Extractive`` over the first 3 passages,
asked the rewritten question) holds the fact. ``rules`` says whether the text rules support the language.
Halves: the first five dialogues and the last five.

    PYTHONPATH=$PWD python bench/text_languages.py
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._language_probes import PROBES  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index_convrag.conversational.contextualize import HistoryTurn, contextualize  # noqa: E402
from llama_index_convrag.conversational.retriever import fuse_ranked  # noqa: E402
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.retrievers import fusion  # noqa: E402
from llama_index_convrag.synthesizers.extractive import Extractive  # noqa: E402
from llama_index_convrag.text import identify, rules_on, split_sentences, terms  # noqa: E402

K1, B = 1.2, 0.75


class Corpus:
    def __init__(self, texts: Sequence[str], embed: LocalMiniLMEmbedding) -> None:
        self.texts = list(texts)
        self.embed = embed
        self.vectors = np.array(embed.get_text_embedding_batch(self.texts))
        self.docs = [Counter(terms(t)) for t in self.texts]
        self.avg = sum(sum(d.values()) for d in self.docs) / len(self.docs)
        self.df = Counter(t for d in self.docs for t in d)

    def bm25(self, query: str) -> List[float]:
        q = terms(query)
        n = len(self.docs)
        out = []
        for d in self.docs:
            length = sum(d.values())
            s = 0.0
            for t in q:
                if t in d:
                    idf = math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                    s += idf * d[t] * (K1 + 1) / (d[t] + K1 * (1 - B + B * length / self.avg))
            out.append(s)
        return out

    def ranked(self, query: str) -> List[Tuple[int, float]]:
        qv = np.array(self.embed.get_query_embedding(query))
        dense = [(i, float(v)) for i, v in enumerate(self.vectors @ qv)]
        sparse = [(i, s) for i, s in enumerate(self.bm25(query)) if s > 0]
        dense.sort(key=lambda x: -x[1])
        sparse.sort(key=lambda x: -x[1])
        lists = [dense, sparse] if sparse else [dense]
        return [(int(i), s) for i, s in fusion.weighted(lists, [0.5] * len(lists))]


def run_language(lang: str, embed: LocalMiniLMEmbedding, extractive: Extractive) -> Dict[str, List[int]]:
    probes = PROBES[lang]
    corpus = Corpus([p.passage for p in probes], embed)
    rows: Dict[str, List[int]] = {"raw": [], "ctx": [], "fact_n": [], "fact": []}
    for i, p in enumerate(probes):
        shown = split_sentences(p.passage)[0]
        raw = corpus.ranked(p.followup)
        plan = contextualize(p.followup, [HistoryTurn(p.question, shown)])
        if plan.query != p.followup:
            own = raw
            ctx = corpus.ranked(plan.query)
            fused, _ = fuse_ranked(own, ctx, plan, lambda d: corpus.texts[d])
        else:
            fused = raw
        rows["raw"].append(int(raw[0][0] == i))
        rows["ctx"].append(int(fused[0][0] == i))
        if fused[0][0] == i:
            nodes = [NodeWithScore(node=TextNode(text=corpus.texts[d], id_=str(d)), score=s) for d, s in fused[:3]]
            answer = str(extractive.synthesize(plan.query, nodes))
            rows["fact_n"].append(1)
            rows["fact"].append(int(p.fact.lower() in answer.lower()))
        else:
            rows["fact_n"].append(0)
            rows["fact"].append(0)
    return rows


def main() -> None:
    embed = LocalMiniLMEmbedding()
    extractive = Extractive(embed_model=embed)
    print("| language | rules | follow-ups | raw first: all (1st / 2nd half) | ctx-fuse first | fact held where "
          "the passage is first |\n|---|---|---|---|---|---|")
    for lang in PROBES:
        r = run_language(lang, embed, extractive)
        n = len(r["raw"])
        h = n // 2

        def part(key: str) -> str:
            return f"{sum(r[key])} ({sum(r[key][:h])} / {sum(r[key][h:])})"

        facts = f"{sum(r['fact'])} of {sum(r['fact_n'])} ({sum(r['fact'][:h])}/{sum(r['fact_n'][:h])}, " \
                f"{sum(r['fact'][h:])}/{sum(r['fact_n'][h:])})"
        language = identify(PROBES[lang][0].followup + " " + PROBES[lang][0].question)
        print(f"| {lang} | {'on' if rules_on(language) else 'off'} | {n} | {part('raw')} | {part('ctx')} | {facts} |")


if __name__ == "__main__":
    main()
