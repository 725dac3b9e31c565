"""Where our retrieval overhead over raw pymilvus goes, per stage (issue 16's 1.05x target).

SciFact 5k (real MiniLM vectors) in Milvus Lite; BM25 and dense top-10, query vectors precomputed. For each search
type, interleaved per query over ``--queries`` x ``--rounds`` calls: raw pymilvus (same output fields, every hit
read), our ranking step alone (``_rankings``: search, lists, fusion, trail positions; no node) and our whole
``retrieve``. Then, inside ``retrieve``'s work, the time of each part of building the 10 nodes (``TextNode`` from the
row, ``NodeWithScore``, the trail), and what one ``TextNode`` costs built other ways.

    PYTHONPATH=. python bench/retrieval_stages.py [--queries 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import copy
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import cached_embeddings, fresh_dir, load_scifact  # noqa: E402
from retrieval_latency import BM25, COS, FIELDS, TOP_K, build, consume  # noqa: E402

from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode  # noqa: E402
from pymilvus import MilvusClient  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.milvus.schema import HIDDEN_METADATA_KEYS, node_from_entity  # noqa: E402
from llama_index_convrag.rank_trail import add_stages  # noqa: E402
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever  # noqa: E402


def rounds(fns: Sequence[Callable[[int], object]], queries: int, reps: int) -> List[float]:
    """Median us per call of each function, interleaved per query (order rotated), after a warm-up."""
    for fn in fns:
        for i in range(min(50, queries)):
            fn(i)
    lat: List[List[float]] = [[] for _ in fns]
    for _ in range(reps):
        for i in range(queries):
            for j in range(len(fns)):
                k = (i + j) % len(fns)
                start = time.perf_counter()
                fns[k](i)
                lat[k].append((time.perf_counter() - start) * 1e6)
    return [statistics.median(x) for x in lat]


def node_parts(r: MilvusHybridRetriever, bundles: List[QueryBundle], reps: int) -> Dict[str, float]:
    """Median us per query of each part of building its nodes, right after its own ranking step."""
    parts: Dict[str, List[float]] = {"TextNode from the row": [], "NodeWithScore": [], "trail": []}
    for _ in range(reps):
        for qb in bundles:
            (ranking,) = r._rankings([qb], lean=False)
            spent = dict.fromkeys(parts, 0.0)
            for key, _ in ranking.kept:
                a = time.perf_counter()
                node = node_from_entity(r.spec, ranking.pks[key], ranking.entities[key])
                b = time.perf_counter()
                nws = NodeWithScore(node=node, score=ranking.score(key))
                c = time.perf_counter()
                add_stages(nws, ranking.trail(key))
                d = time.perf_counter()
                for name, t in zip(parts, (b - a, c - b, d - c)):
                    spent[name] += t * 1e6
            for name in parts:
                parts[name].append(spent[name])
    return {name: statistics.median(v) for name, v in parts.items()}


def one_node_ways(text: str, n: int = 20000) -> Dict[str, float]:
    """Median us to build one TextNode with the same text, metadata and source relation, several ways."""
    hidden = list(HIDDEN_METADATA_KEYS)
    proto = TextNode(id_="x", text="", metadata={}, excluded_llm_metadata_keys=[], excluded_embed_metadata_keys=[])
    related = RelatedNodeInfo(node_id="x")

    def full() -> object:
        node = TextNode(id_="1", text=text, metadata={"n": 1, "doc_id": "d1"}, excluded_llm_metadata_keys=list(hidden),
                        excluded_embed_metadata_keys=list(hidden))
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="d1")
        return node

    def copied() -> object:  # no validation: a prototype's __dict__ filled in
        node, rel = copy.copy(proto), copy.copy(related)
        rel.__dict__["node_id"] = "d1"
        node.__dict__.update(id_="1", text=text, metadata={"n": 1, "doc_id": "d1"}, relationships={
            NodeRelationship.SOURCE: rel}, excluded_llm_metadata_keys=list(hidden),
            excluded_embed_metadata_keys=list(hidden))
        return node

    def constructed() -> object:
        return TextNode.model_construct(id_="1", text=text, metadata={"n": 1, "doc_id": "d1"},
                                        excluded_llm_metadata_keys=list(hidden),
                                        excluded_embed_metadata_keys=list(hidden), relationships={
                                            NodeRelationship.SOURCE: RelatedNodeInfo.model_construct(node_id="d1")})

    ways = {"TextNode(id, text) only": lambda: TextNode(id_="1", text=text),
            "TextNode + metadata, hidden keys, source relation (ours)": full,
            "copied prototype, __dict__ filled (no validation)": copied,
            "model_construct": constructed}
    out = {}
    for name, fn in ways.items():
        for _ in range(1000):
            fn()
        lat = []
        for _ in range(n):
            start = time.perf_counter()
            fn()
            lat.append((time.perf_counter() - start) * 1e6)
        out[name] = statistics.median(lat)
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    model = LocalMiniLMEmbedding()
    _, texts, queries, _ = load_scifact()
    vectors = cached_embeddings(model, texts, "scifact_corpus")
    db = fresh_dir("retrieval_stages")
    uri = str(db / "s.db")
    client = MilvusClient(uri)
    name, _ = build(client, uri, "5k", texts, vectors)
    qs = list(queries.values())[: args.queries]
    qv = [model.get_query_embedding(q) for q in qs]
    print(f"\n{len(texts)} SciFact abstracts, top-{TOP_K}, {len(qs)} queries x {args.rounds} rounds, interleaved\n")
    print("| search | raw us | ours: ranking only us | ours: retrieve us | retrieve / raw |")
    print("|---|---|---|---|---|")
    for search_type, field, params, data in (("sparse", "sparse_embedding", BM25, qs),
                                             ("dense", "embedding", COS, qv)):
        r = MilvusHybridRetriever.from_defaults(collection_name=name, client=client, embed_model=model,
                                                similarity_top_k=TOP_K, search_type=search_type)
        bundles = [QueryBundle(q, embedding=v) for q, v in zip(qs, qv)]

        def raw(i: int, field: str = field, params: dict = params, data: list = data) -> object:
            return consume(client.search(name, data=[data[i]], anns_field=field, limit=TOP_K,
                                         search_params=params, output_fields=FIELDS))

        raw_us, rank_us, ours_us = rounds([raw, lambda i: r._rankings([bundles[i]], lean=False),
                                           lambda i: r.retrieve(bundles[i])], len(qs), args.rounds)
        print(f"| {search_type} | {raw_us:.0f} | {rank_us:.0f} | {ours_us:.0f} | {ours_us / raw_us:.3f} |")
        if search_type == "sparse":
            parts = node_parts(r, bundles, args.rounds)
    print(f"\nBuilding the {TOP_K} nodes of one BM25 retrieval, median us per query: "
          + ", ".join(f"{k} {v:.0f}" for k, v in parts.items()))
    print("\n| one TextNode (a SciFact abstract's text) built as | us |\n|---|---|")
    for way, us in one_node_ways(texts[0]).items():
        print(f"| {way} | {us:.2f} |")


if __name__ == "__main__":
    main()
