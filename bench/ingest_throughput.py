"""Ingestion throughput: chunks/s of ``ingest`` split into embedding and Milvus insert time.

SciFact abstracts are written as .txt files and ingested (read -> the default splitter, sized to the model's
window -> MiniLM -> upsert). Side by side: the embedding model's ceiling (one ``embed`` call on the same chunk
texts), raw pymilvus insert of the same rows, and LlamaIndex ``MilvusVectorStore.add`` of the same nodes and
vectors.

    PYTHONPATH=. python bench/ingest_throughput.py [--quick] [--server-rounds N]
    PYTHONPATH=. python bench/ingest_throughput.py --quick --variants N

``--variants N``: the local model's installed graph unfused (``fused=False``, the default before the fused graph)
and its variants (``fp32``, fused; ``int8``) ingesting the same files into fresh collections, alternating, N rounds;
each round also times each one's ceiling (one ``embed`` call on the stored chunk texts, wall and CPU time). Prints
per round and the medians: ingest chunks/s, ceiling chunks/s, ingest over ceiling, the load average, and each variant
over the unfused graph.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, assert_variant, load_scifact  # noqa: E402
from ingest_server import write_files  # noqa: E402

from llama_index.core.schema import TextNode  # noqa: E402
from pymilvus import MilvusClient  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.ingest.pipeline import ingest  # noqa: E402
from llama_index_convrag.milvus.schema import create_collection, default_spec, detect_spec  # noqa: E402


def server_ingest(work: Path, client: MilvusClient, chunk_texts: Sequence[str],
                  collection: str = "server_ingest") -> dict:
    """A GPU box or embedding server, seen through the OpenAI-compatible embeddings path: ``LocalOpenAIServer``
    answers /v1/embeddings with seeded 384-d vectors after ``delay`` s per request (no model work), so what is left
    is the pipeline's own cost. Ceiling = the same client embedding the same chunk texts, nothing else."""
    import numpy as np
    from llama_index.embeddings.openai import OpenAIEmbedding

    from llama_index_convrag.testing import LocalOpenAIServer

    def vectors(texts):
        rng = np.random.default_rng(len(texts))
        v = rng.normal(size=(len(texts), 384))
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).tolist()

    out = {}
    print("\nembedding server (OpenAI-compatible /v1/embeddings, 20 ms per request of up to 128 texts):")
    with LocalOpenAIServer(embed_fn=vectors) as server:
        server.delay_s = 0.02
        model = OpenAIEmbedding(model_name="text-embedding-3-small", api_key="x", api_base=server.base_url,
                                embed_batch_size=128, dimensions=384)
        model.get_text_embedding_batch(["warm-up"])  # client set-up and first connection out of the ceiling
        t0 = time.perf_counter()
        for i in range(0, len(chunk_texts), 128):
            model.get_text_embedding_batch(list(chunk_texts[i : i + 128]))
        ceiling = len(chunk_texts) / (time.perf_counter() - t0)
        rep = ingest([work / "files"], client=client, collection_name=collection, embed_model=model, batch_size=128)
        again = ingest([work / "files"], client=client, collection_name=collection, embed_model=model)
        out = {"chunks": rep.chunks, "ingest_chunks_per_s": rep.chunks / rep.total_seconds,
               "server_ceiling_chunks_per_s": ceiling, "embed_s": rep.embed_seconds, "insert_s": rep.insert_seconds,
               "total_s": rep.total_seconds, "reingest_unchanged_s": again.total_seconds}
    print(f"  server ceiling {ceiling:.0f} chunks/s; ingest {out['ingest_chunks_per_s']:.0f} chunks/s "
          f"({out['ingest_chunks_per_s'] / ceiling:.2f}x of the ceiling; embed {rep.embed_seconds:.1f} s, "
          f"insert {rep.insert_seconds:.1f} s overlapped, total {rep.total_seconds:.1f} s); "
          f"re-ingest of the {len(again.unchanged)} unchanged files {again.total_seconds:.3f} s")
    return out


def variant_rounds(work: Path, client: MilvusClient, rounds: int) -> None:
    """The installed graph unfused (the default before the fused graph), fp32 (fused) and int8 ingest the same
    files alternately (a fresh collection each time), each with its ceiling; ratios are over the unfused graph's."""
    import statistics

    models = {"fp32 unfused": LocalMiniLMEmbedding(variant="fp32", fused=False),
              "fp32": LocalMiniLMEmbedding(variant="fp32"), "int8": LocalMiniLMEmbedding(variant="int8")}
    for label, model in models.items():
        model.warm_up()  # the fused and int8 files are made here (once per cache key), not in a timed round
        assert_variant(model, label.split()[0])
    rate: dict = {v: [] for v in models}
    ceiling: dict = {v: [] for v in models}
    cpu: dict = {v: [] for v in models}
    print(f"{'round':>5s} {'variant':>12s} {'chunks':>6s} {'ingest chunks/s':>15s} {'ceiling chunks/s':>16s} "
          f"{'of ceiling':>10s} {'ceiling CPU s':>13s} {'load':>5s}")
    for r in range(rounds):
        order = list(models) if r % 2 == 0 else list(reversed(models))
        for variant in order:
            name = f"variant_{variant.replace(' ', '_')}_{r}"
            if client.has_collection(name):
                client.drop_collection(name)
            rep = ingest([work / "files"], client=client, collection_name=name, embed_model=models[variant])
            recorded = detect_spec(client, name).embed_model
            assert recorded == models[variant].embed_model_id, f"{variant} round wrote {recorded!r} vectors"
            texts = [row["text"] for row in client.query(name, filter='id != ""', output_fields=["text"],
                                                           limit=16384)]
            t0, c0 = time.perf_counter(), time.process_time()
            models[variant].embed(texts)
            ceiling[variant].append(len(texts) / (time.perf_counter() - t0))
            cpu[variant].append(time.process_time() - c0)
            rate[variant].append(rep.chunks / rep.total_seconds)
            client.drop_collection(name)
            print(f"{r:5d} {variant:>12s} {rep.chunks:6d} {rate[variant][-1]:15.1f} {ceiling[variant][-1]:16.1f} "
                  f"{rate[variant][-1] / ceiling[variant][-1]:10.2f} {cpu[variant][-1]:13.1f} "
                  f"{os.getloadavg()[0]:5.1f}", flush=True)
    for variant in models:
        print(f"median {variant}: ingest {statistics.median(rate[variant]):.1f} chunks/s, ceiling "
              f"{statistics.median(ceiling[variant]):.1f} chunks/s, ceiling CPU {statistics.median(cpu[variant]):.1f} s")
    base = "fp32 unfused"
    for variant in list(models)[1:]:
        ratio = [a / b for a, b in zip(rate[variant], rate[base])]
        ceil_ratio = [a / b for a, b in zip(ceiling[variant], ceiling[base])]
        cpu_ratio = [b / a for a, b in zip(cpu[variant], cpu[base])]
        print(f"{variant} / {base} per round, ingest: {' '.join(f'{x:.2f}' for x in ratio)} (median "
              f"{statistics.median(ratio):.2f}); ceiling: {' '.join(f'{x:.2f}' for x in ceil_ratio)} (median "
              f"{statistics.median(ceil_ratio):.2f}); ceiling by CPU time: {' '.join(f'{x:.2f}' for x in cpu_ratio)} "
              f"(median {statistics.median(cpu_ratio):.2f})")


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 files instead of 400")
    ap.add_argument("--server-rounds", type=int, default=0, metavar="N",
                    help="instead: only the embedding-server measurement, N rounds (the files' texts as the ceiling's)")
    ap.add_argument("--variants", type=int, default=0, metavar="N",
                    help="instead: fp32 unfused, fp32 and int8 ingesting the same files, alternating, N rounds")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    n_files = 100 if args.quick else 400
    _, texts, _, _ = load_scifact()
    work = write_files(n_files, "ingest_bench")
    uri = str(work / "ingest.db")
    client = MilvusClient(uri)
    if args.variants:
        print(f"{n_files} SciFact abstracts as .txt, default chunking, Milvus Lite 2.5.1; the variants alternate")
        variant_rounds(work, client, args.variants)
        client.close()
        return
    if args.server_rounds:
        print(f"{n_files} SciFact abstracts as .txt; warm-up round (tokenizer and splitter load), not counted:")
        server_ingest(work, client, texts[:n_files], collection="server_warm_up")
        for r in range(args.server_rounds):
            server_ingest(work, client, texts[:n_files], collection=f"server_round{r}")
        client.close()
        return
    model = LocalMiniLMEmbedding()
    model.warm_up()
    rows_out = []
    print(f"{n_files} SciFact abstracts as .txt, MiniLM-L6 ONNX int8 (max 256 tokens), Milvus Lite 2.5.1\n")
    print(f"{'run':34s} {'chunks':>6s} {'embed s':>8s} {'insert s':>8s} {'chunks/s':>8s} {'embed/s':>8s} {'insert rows/s':>13s}")
    for batch in (32, 128):
        name = f"ingest_b{batch}"
        rep = ingest([work / "files"], client=client, collection_name=name, embed_model=model, batch_size=batch)
        row = {"run": f"ours ingest batch_size={batch}", "chunks": rep.chunks, "embed_s": rep.embed_seconds,
               "insert_s": rep.insert_seconds, "total_s": rep.total_seconds}
        rows_out.append(row)
        print(f"{row['run']:34s} {rep.chunks:6d} {rep.embed_seconds:8.1f} {rep.insert_seconds:8.2f} "
              f"{rep.chunks / rep.total_seconds:8.1f} {rep.chunks / rep.embed_seconds:8.1f} "
              f"{rep.chunks / rep.insert_seconds:13.0f}", flush=True)
        again = ingest([work / "files"], client=client, collection_name=name, embed_model=model)
        print(f"  re-ingest unchanged: {len(again.unchanged)} unchanged in {again.total_seconds:.2f} s")

    stored = client.query("ingest_b128", filter='id != ""', output_fields=["*"], limit=16384)
    chunk_texts = [r["text"] for r in stored]
    t0 = time.perf_counter()
    model.embed(chunk_texts)
    ceil = time.perf_counter() - t0
    print(f"{'model ceiling: one embed() call':34s} {len(chunk_texts):6d} {ceil:8.1f} {'':8s} {'':8s} "
          f"{len(chunk_texts) / ceil:8.1f}")
    for row in rows_out:
        print(f"  {row['run']}: {row['chunks'] / row['total_s'] / (len(chunk_texts) / ceil):.2f}x of the model's "
              "ceiling (end to end, reading and inserting included)")

    rows = [{k: r[k] for k in ("id", "doc_id", "text", "embedding", "metadata")} for r in stored]
    create_collection(client, "raw_insert", default_spec(384))
    t0 = time.perf_counter()
    for i in range(0, len(rows), 128):
        client.insert("raw_insert", rows[i : i + 128])
    raw_s = time.perf_counter() - t0
    from llama_index.vector_stores.milvus import MilvusVectorStore

    li = MilvusVectorStore(uri=uri, collection_name="li_insert", dim=384, enable_sparse=True)
    nodes = [TextNode(id_=r["id"], text=r["text"], metadata=r["metadata"], embedding=r["embedding"]) for r in rows]
    t0 = time.perf_counter()
    li.add(nodes)
    li_s = time.perf_counter() - t0
    print(f"{'raw pymilvus insert (same rows)':34s} {len(rows):6d} {'':8s} {raw_s:8.2f} {'':8s} {'':8s} {len(rows) / raw_s:13.0f}")
    print(f"{'LlamaIndex MilvusVectorStore.add':34s} {len(rows):6d} {'':8s} {li_s:8.2f} {'':8s} {'':8s} {len(rows) / li_s:13.0f}")
    server_rows = server_ingest(work, client, chunk_texts)
    out = OUT / ("ingest_throughput_quick.json" if args.quick else "ingest_throughput.json")
    out.write_text(json.dumps({"runs": rows_out, "server": server_rows,
                               "model_ceiling_passages_per_s": len(chunk_texts) / ceil,
                               "raw_insert_rows_per_s": len(rows) / raw_s,
                               "llamaindex_add_rows_per_s": len(rows) / li_s}, indent=1))
    print(f"\nwritten {out}")
    client.close()


if __name__ == "__main__":
    main()
