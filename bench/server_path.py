"""The server path: this package against a real Milvus server process, Milvus Lite 3.x's ``milvus-lite server``.

Starts ``milvus-lite server --data-dir D --port P`` from a separate virtual environment (see
``llama_index_convrag.testing.lite_server``), then through ``http://127.0.0.1:P``: creates a collection (the default
``english`` analyzer, then ``standard``), ingests a folder, retrieves dense / sparse / hybrid (RRF and weighted)
with and without metadata filters, runs two client processes at once (queries while another process ingests), and
``convrag ingest/ask --uri http://...``. Prints one row per step.

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/server_path.py [--corpus docs] [--venv /work/venv-lite3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, List, Tuple

from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.ingest import ingest
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from llama_index_convrag.milvus.client import connect_milvus
from llama_index_convrag.testing.lite_server import SETUP_HINT, LiteServer, lite3_executable

REPO = Path(__file__).resolve().parents[1]
QUESTION = "How does one chat turn flow?"
CLIENT_SCRIPT = """
import sys
from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
t = MilvusTarget(uri=sys.argv[1])
r = MilvusHybridRetriever.from_defaults(collection_name=sys.argv[2], target=t, embed_model=LocalMiniLMEmbedding(),
                                        search_type="hybrid", similarity_top_k=3)
hits = [len(r.retrieve(f"question {i} about chat turns and retrieval")) for i in range(int(sys.argv[3]))]
print(sum(hits), flush=True)
"""

Row = Tuple[str, str, str]


def step(rows: List[Row], name: str, fn: Callable[[], str]) -> Any:
    t0 = time.perf_counter()
    try:
        detail = fn()
        ok = "ok"
    except Exception as exc:  # noqa: BLE001 - a bench reports failures as rows
        detail, ok = f"{type(exc).__name__}: {str(exc)[:160]}", "FAILED"
    detail = " ".join(detail.split())  # one table row even for multi-line server messages
    rows.append((name, ok, f"{detail} ({(time.perf_counter() - t0) * 1000:.0f} ms)"))
    print(f"| {name} | {ok} | {rows[-1][2]} |", flush=True)


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", default=None, help="virtual environment with milvus-lite>=3 (default /work/venv-lite3)")
    ap.add_argument("--corpus", default=str(REPO / "docs"), help="folder to ingest (default: the repo's docs/)")
    ap.add_argument("--queries", type=int, default=20, help="hybrid queries per client process (default 20)")
    args = ap.parse_args()
    exe = lite3_executable(args.venv)
    if exe is None:
        print(f"Milvus Lite 3.x is not installed: {SETUP_HINT}")
        return 2
    version = subprocess.run([str(exe.parent / "python"), "-c", "import importlib.metadata as m; "
                              "print(m.version('milvus-lite'))"], capture_output=True, text=True).stdout.strip()
    model = LocalMiniLMEmbedding()
    rows: List[Row] = []
    print(f"milvus-lite {version} server; client pymilvus from this environment\n")
    print("| step | result | detail |\n|---|---|---|")
    with LiteServer(exe) as server:
        target = MilvusTarget(uri=server.uri)
        client = connect_milvus(target)
        step(rows, "connect", lambda: f"{server.uri}, collections {client.list_collections()}")
        step(rows, "ingest, analyzer 'english' (the default)",
             lambda: str(ingest([args.corpus], collection_name="english_docs", embed_model=model, client=client,
                                target=target)).splitlines()[0])
        step(rows, "ingest, analyzer 'standard'",
             lambda: str(ingest([args.corpus], collection_name="docs", embed_model=model, client=client,
                                target=target, analyzer="standard")).splitlines()[0])
        step(rows, "dense index of a server collection",
             lambda: str({k: v for k, v in client.describe_index("docs", "embedding").items()
                          if k in ("index_type", "metric_type")}))

        def retrieve(search_type: str, ranker: str = "", filters: Any = None) -> str:
            kw: dict = {"search_type": search_type, "similarity_top_k": 3, "filters": filters}
            if ranker:
                kw["ranker_type"] = ranker
            r = MilvusHybridRetriever.from_defaults(collection_name="docs", embed_model=model, target=target,
                                                    client=client, **kw)
            hits = r.retrieve(QUESTION)
            return ", ".join(f"{n.node.metadata.get('file_name')} {n.score:.3f}" for n in hits) or "no hits"

        for st, ranker in [("dense", ""), ("sparse", ""), ("hybrid", "rrf"), ("hybrid", "weighted")]:
            step(rows, f"retrieve {st} {ranker}".strip(), lambda st=st, ranker=ranker: retrieve(st, ranker))
        eq = MetadataFilters(filters=[MetadataFilter(key="file_name", value="GUIDE.md", operator=FilterOperator.EQ)])
        inn = MetadataFilters(filters=[MetadataFilter(key="file_name", value=["GUIDE.md", "x.md"],
                                                      operator=FilterOperator.IN)])
        like = MetadataFilters(filters=[MetadataFilter(key="file_name", value="GUI",
                                                       operator=FilterOperator.TEXT_MATCH)])
        for name, f in [("==", eq), ("in", inn), ("like", like)]:
            for st in ("dense", "sparse", "hybrid"):
                step(rows, f"filter file_name {name}, {st}", lambda st=st, f=f: retrieve(st, "rrf", f))

        def two_clients() -> str:
            procs = [subprocess.Popen([sys.executable, "-c", CLIENT_SCRIPT, server.uri, "docs", str(args.queries)],
                                      env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for _ in range(2)]
            report = ingest([REPO / "README.md"], collection_name="docs", embed_model=model, client=client,
                            target=target)
            outs = [p.communicate(timeout=600) for p in procs]
            codes = [p.returncode for p in procs]
            if codes != [0, 0]:
                raise RuntimeError(f"client exit codes {codes}: {[o[1][-300:] for o in outs]}")
            return (f"2 processes x {args.queries} hybrid queries -> hits {[o[0].strip() for o in outs]}, "
                    f"while this process ingested {len(report.added)} file(s)")

        step(rows, "two client processes + a concurrent ingest", two_clients)
        with tempfile.TemporaryDirectory() as tmp:
            def cli(*argv: str) -> str:
                done = subprocess.run([sys.executable, "-m", "llama_index_convrag.cli", *argv, "--uri", server.uri,
                                       "--collection", "cli_docs"], env=env(), cwd=tmp, capture_output=True,
                                      text=True, timeout=600)
                if done.returncode != 0:
                    raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip()[-200:]}")
                return done.stdout.strip().splitlines()[0]

            step(rows, "convrag ingest --uri http://... (default analyzer)", lambda: cli("ingest", args.corpus))
            step(rows, "convrag ingest --uri http://... --analyzer standard",
                 lambda: cli("ingest", args.corpus, "--analyzer", "standard"))
            step(rows, "convrag ask --uri http://...", lambda: cli("ask", args.corpus, QUESTION, "--top-k", "2"))
    failed = [r for r in rows if r[1] != "ok"]
    print(f"\n{len(rows) - len(failed)}/{len(rows)} steps ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
