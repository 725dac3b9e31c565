"""What a fused no-LLM follow-up costs over a plain turn's retrieval, query embedding included (issue 13).

SciFact abstracts (5,183, their cached MiniLM vectors) in Milvus Lite; the default retriever (weighted hybrid with
dense feedback, top 5). A *plain turn* retrieves one new text: one query embedding, one search with feedback. A
*fused follow-up* is ``ConversationalRetriever`` over the same retriever with a ``contextual`` plan ("What about its
effects on <word>?" after a SciFact claim): two query embeddings (the question as typed and the expanded query), the
two 50-deep searches without feedback sent together (one Milvus call per field, ``rank_many``), the coverage, the
fusion and one fetch of the texts it reads. Every text is new to the embedding cache (disjoint
slices of the plans per system); systems run interleaved per query, paired ratio = median of per-query ratios.

    PYTHONPATH=. python bench/followup_cost.py [--queries 200]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import cached_embeddings, fresh_dir, load_scifact  # noqa: E402
from retrieval_latency import interleaved  # noqa: E402

from pymilvus import MilvusClient  # noqa: E402

from llama_index_convrag.conversational.contextualize import Contextualized, HistoryTurn, contextualize  # noqa: E402
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.milvus.schema import create_collection, default_spec  # noqa: E402
from llama_index_convrag.conversational.query import ConversationalQuery  # noqa: E402
from llama_index_convrag.conversational.retriever import ConversationalRetriever  # noqa: E402
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever  # noqa: E402


def carrying(plan: Contextualized) -> ConversationalQuery:
    """The query a chat turn hands the retriever: the expanded text carrying its plan."""
    return ConversationalQuery(plan.query, plan=plan)


def plans_for(claims: Sequence[str]) -> List[Contextualized]:
    """One follow-up per consecutive pair of claims, kept when the contextualiser adds history terms."""
    out = []
    for prev, nxt in zip(claims, claims[1:]):
        plan = contextualize(f"What about its effects on {nxt.split()[-1].strip('.')}?", [HistoryTurn(prev, "")])
        if plan.added:
            out.append(plan)
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=200, help="timed turns per system (default 200)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    model = LocalMiniLMEmbedding()
    _, texts, queries, _ = load_scifact()
    vectors = cached_embeddings(model, texts, "scifact_corpus")
    db = fresh_dir("followup_cost")
    client = MilvusClient(str(db / "f.db"))
    create_collection(client, "scifact", default_spec(384))
    rows = [{"id": str(i), "doc_id": f"d{i}", "text": t, "embedding": v.tolist(), "metadata": {}}
            for i, (t, v) in enumerate(zip(texts, vectors))]
    for i in range(0, len(rows), 1000):
        client.insert("scifact", rows[i : i + 1000])
    plans = plans_for(list(queries.values()))
    warmup = 10
    need = args.queries + warmup
    if len(plans) < 2 * need:
        raise SystemExit(f"{len(plans)} follow-ups; need {2 * need} for --queries {args.queries}")
    plain_plans, fused_plans = plans[:need], plans[need : 2 * need]
    retriever = MilvusHybridRetriever.from_defaults(collection_name="scifact", client=client, embed_model=model,
                                                    similarity_top_k=5)
    fused = ConversationalRetriever.deepened(retriever)
    model.warm_up()
    fresh_plain, fresh_fused = iter(plain_plans), iter(fused_plans)  # each call a text the cache has not seen
    stats = interleaved([lambda _: retriever.retrieve(next(fresh_plain).query),
                         lambda _: fused.retrieve(carrying(next(fresh_fused)))], args.queries, warmup=warmup)
    print(f"{len(texts)} SciFact abstracts, default retriever (top 5), {args.queries} turns per system, interleaved\n")
    print("| turn | p50 ms | p95 ms | paired ratio |\n|---|---|---|---|")
    for name, s in zip(["plain turn: 1 embedding, 1 search with feedback",
                        "fused follow-up: 2 embeddings, 2 searches together (50 deep, no feedback), fusion"], stats):
        print(f"| {name} | {s['p50']:.2f} | {s['p95']:.2f} | {s['paired']:.2f} |")
    print(f"\nadded by the fused follow-up: {stats[1]['p50'] - stats[0]['p50']:.2f} ms p50")
    client.close()


if __name__ == "__main__":
    main()
