"""Ingest against an embedding server: the pipeline beside the server's ceiling, and the Ray engine beside it.

SciFact abstracts are written as .txt files. An OpenAI-compatible embedding server runs in its own process (as a real
one does, on another machine): /v1/embeddings answers with seeded 384-d unit vectors after ``--delay`` seconds per
request, base64-encoded as the openai client asks, so what the client sees is the server's latency and the HTTP
cost, and no model work.

* the default: the server's ceiling (the client doing nothing but embed the same chunk texts, 128 per request: one
  request at a time, and ``--concurrency`` at once) and Milvus Lite's insert ceiling (the same rows, vectors
  included, inserted 128 at a time, nothing else) beside ``ingest`` end to end (hash, read, split, embed, insert
  into Milvus Lite) with one request in flight, with the defaults, and with ``--concurrency`` requests and
  ``--readers`` reader processes.
* ``--distributed``: into a Milvus server (milvus-lite 2.5.1's gRPC server as a process), the single-process server
  path beside the Ray engine with 1 and 2 workers on a local cluster (each after a warm-up run, not counted).

Peak memory is the highest sum of resident memory sampled every 100 ms: this process and its reader processes (the
embedding server and Milvus are left out), and for Ray also every Ray process on the machine.

    PYTHONPATH=$PWD python bench/ingest_server.py [--quick] [--files N] [--per-file K] [--delay S] [--rounds R]
        [--concurrency C] [--readers W] [--distributed]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, load_scifact  # noqa: E402

from llama_index_convrag.ingest.pipeline import ingest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: A stand-in for a remote embedding server (TEI, vLLM, OpenAI): /v1/embeddings after a fixed delay, vectors as
#: base64 float32 when asked (the openai client asks; real servers honour it), else JSON lists. Seeded unit vectors.
SERVER_SCRIPT = """
import base64, json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import numpy as np

DELAY = float(sys.argv[1])
POOL = np.random.default_rng(0).normal(size=(4096, 384)).astype(np.float32)
POOL /= np.linalg.norm(POOL, axis=1, keepdims=True)

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        time.sleep(DELAY)
        rows = POOL[[hash(t) % len(POOL) for t in texts]]
        b64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(r.tobytes()).decode() if b64 else r.tolist()} for i, r in enumerate(rows)]
        out = json.dumps({"object": "list", "model": body.get("model", "x"), "data": data,
                          "usage": {"prompt_tokens": 0, "total_tokens": 0}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
import threading
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()  # until the bench closes our stdin
"""


@contextmanager
def embedding_server(delay: float) -> Iterator[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(delay)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def client_model(base_url: str) -> Any:
    from llama_index.embeddings.openai import OpenAIEmbedding

    return OpenAIEmbedding(model_name="text-embedding-3-small", api_key="x", api_base=base_url, embed_batch_size=128,
                           dimensions=384)


class PeakMemory:
    """Samples the summed RSS of this process and the children ``count`` keeps, every 100 ms, in a thread."""

    def __init__(self, count: Callable[[psutil.Process], bool]) -> None:
        self.count = count
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = me.memory_info().rss
            for child in me.children(recursive=True):
                try:
                    if self.count(child):
                        total += child.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(0.1)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mb(self) -> float:
        return self.peak / (1 << 20)


def readers_only(skip: Sequence[int]) -> Callable[[psutil.Process], bool]:
    """Count this process's children except the embedding server and Milvus."""
    def keep(p: psutil.Process) -> bool:
        return p.pid not in skip and "milvus" not in p.name().lower()
    return keep


def ceiling(model: Any, texts: Sequence[str], concurrency: int) -> float:
    """Chunks/s of the client embedding ``texts`` 128 per request, ``concurrency`` requests at once."""
    batches = [list(texts[i : i + 128]) for i in range(0, len(texts), 128)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(model.get_text_embedding_batch, batches))
    return len(texts) / (time.perf_counter() - t0)


def insert_ceiling(client: Any, name: str, stored: Sequence[Dict[str, Any]]) -> float:
    """Rows/s of inserting ``stored`` (vectors included, BM25 computed by Milvus) into a new collection, nothing else."""
    from llama_index_convrag.milvus.schema import create_collection, default_spec

    rows = [{k: v for k, v in row.items() if k != "sparse_embedding"} for row in stored]
    create_collection(client, name, default_spec(len(rows[0]["embedding"])))
    t0 = time.perf_counter()
    for i in range(0, len(rows), 128):
        client.insert(name, rows[i : i + 128])
    return len(rows) / (time.perf_counter() - t0)


def write_files(n: int, name: str = "ingest_server", per_file: int = 1) -> Path:
    """``OUT/name``, emptied, with the first ``n`` SciFact abstracts in ``files/docNNNNN.txt``, ``per_file`` to a
    file (blank-line separated)."""
    _, texts, _, _ = load_scifact()
    root = OUT / name
    shutil.rmtree(root, ignore_errors=True)
    (root / "files").mkdir(parents=True)
    for i in range(0, n, per_file):
        (root / "files" / f"doc{i:05d}.txt").write_text("\n\n".join(texts[i : min(n, i + per_file)]),
                                                        encoding="utf-8")
    return root


def timed_ingest(label: str, run: Callable[[], Any], count: Callable[[psutil.Process], bool]) -> Dict[str, Any]:
    with PeakMemory(count) as mem:
        report = run()
    rate = report.chunks / report.total_seconds
    return {"run": label, "chunks": report.chunks, "seconds": report.total_seconds, "chunks_per_s": rate,
            "peak_mb": mem.mb, "embed_s": report.embed_seconds, "insert_s": report.insert_seconds}


def server_section(root: Path, base_url: str, rounds: int, concurrency: int, readers: int, skip: List[int]) -> None:
    from pymilvus import MilvusClient

    from llama_index_convrag.ingest.limits import PipelineLimits

    model = client_model(base_url)
    model.get_text_embedding_batch(["warm-up"])  # client set-up and the first connection
    client = MilvusClient(str(root / "ingest.db"))
    limits = PipelineLimits().resolved(model)
    configs = {"1 request in flight, reading in this thread": {"embed_concurrency": 1, "read_workers": 0},
               f"default ({limits.embed_concurrency} requests at once, {limits.read_workers} reader processes)": {},
               f"{concurrency} requests at once, {readers} reader process(es)": {"embed_concurrency": concurrency,
                                                                               "read_workers": readers}}
    ingest([root / "files"], client=client, collection_name="warm_up", embed_model=model)  # splitter, tokenizer
    rows: List[Dict[str, Any]] = []
    for r in range(rounds):
        for i, (label, kw) in enumerate(configs.items()):
            name = f"c{r}_{i}"
            rows.append(timed_ingest(label, lambda name=name, kw=kw: ingest(
                [root / "files"], client=client, collection_name=name, embed_model=model, **kw), readers_only(skip)))
        stored = client.query(f"c{r}_0", filter='id != ""', output_fields=["*"], limit=16384)
        texts = [s["text"] for s in stored]
        rows.append({"run": "insert ceiling: the same rows into Milvus Lite, 128 per insert", "chunks": len(stored),
                     "chunks_per_s": insert_ceiling(client, f"c{r}_raw", stored)})
        rows.append({"run": "ceiling, 1 request at a time", "chunks": len(texts), "chunks_per_s": ceiling(model, texts, 1)})
        rows.append({"run": f"ceiling, {concurrency} requests at once", "chunks": len(texts),
                     "chunks_per_s": ceiling(model, texts, concurrency)})
    print(f"\n| run | chunks | s | chunks/s | x of the 1-request ceiling | x of the {concurrency}-request ceiling | "
          "embedding s (summed) | insert s | peak MB |\n|---|---|---|---|---|---|---|---|---|")
    for r in range(rounds):
        part = rows[r * (len(configs) + 3) : (r + 1) * (len(configs) + 3)]
        one, many = part[-2]["chunks_per_s"], part[-1]["chunks_per_s"]
        for row in part:
            print(f"| {row['run']} | {row['chunks']} | {row.get('seconds', 0):.2f} | {row['chunks_per_s']:.0f} | "
                  f"{row['chunks_per_s'] / one:.2f} | {row['chunks_per_s'] / many:.2f} | "
                  f"{row.get('embed_s', 0):.2f} | {row.get('insert_s', 0):.2f} | {row.get('peak_mb', 0):.0f} |",
                  flush=True)


def distributed_section(root: Path, base_url: str, skip: List[int]) -> None:
    import ray

    from llama_index_convrag.ingest.distributed import ingest_distributed
    from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus
    from llama_index_convrag.milvus.schema import default_dense_index
    from llama_index_convrag.testing.milvus_server import MilvusLiteServer

    cpus = psutil.cpu_count() or 2
    factory = partial(client_model, base_url)
    options = {"dense_index": default_dense_index(is_lite=True)}  # milvus-lite's engine serves: FLAT
    everything: Callable[[psutil.Process], bool] = lambda p: p.pid not in skip and "milvus" not in p.name().lower()
    files = sorted((root / "files").iterdir())
    warm = root / "warm"  # two read windows: both Ray workers start, import, build the model before timing
    warm.mkdir()
    for f in files[: 2 * 64 + 10]:
        shutil.copy(f, warm / f.name)
    with MilvusLiteServer(root / "milvus_server") as server:
        target = MilvusTarget(uri=server.uri)
        client = connect_milvus(target)
        model = factory()
        ingest([warm], collection_name="one_warm_up", target=target, client=client, embed_model=model, **options)
        rows = [timed_ingest("single process, default stages", lambda: ingest(
            [root / "files"], collection_name="one", target=target, client=client, embed_model=model, **options),
            readers_only(skip))]  # before Ray starts: its processes are not this run's
        ray.init(num_cpus=cpus, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        ingest_distributed([warm], collection_name="ray_warm_up", target=target, embed_factory=factory, workers=2,
                           **options)
        for workers in (1, 2):
            rows.append(timed_ingest(f"Ray Data, {workers} worker(s)", lambda workers=workers: ingest_distributed(
                [root / "files"], collection_name=f"ray{workers}", target=target, embed_factory=factory,
                workers=workers, **options), everything))
        ray.shutdown()
    base = rows[0]["chunks_per_s"]
    print(f"\nRay: local cluster of {cpus} CPUs, warmed up; peak MB counts the driver and every Ray process\n")
    print("| run | chunks | s | chunks/s | x of single process | peak MB |\n|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['run']} | {row['chunks']} | {row['seconds']:.2f} | {row['chunks_per_s']:.0f} | "
              f"{row['chunks_per_s'] / base:.2f} | {row['peak_mb']:.0f} |", flush=True)


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 files instead of 400")
    ap.add_argument("--files", type=int, default=None, help="number of SciFact abstracts (default 400)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of the server section (alternating runs)")
    ap.add_argument("--delay", type=float, default=0.02, help="server seconds per request (default 0.02)")
    ap.add_argument("--concurrency", type=int, default=4, help="requests at once for the second ceiling and run")
    ap.add_argument("--readers", type=int, default=1, help="reader processes of the third run (default 1)")
    ap.add_argument("--per-file", type=int, default=1, help="abstracts per file (default 1: one chunk per file)")
    ap.add_argument("--distributed", action="store_true", help="instead: single process vs the Ray engine")
    args = ap.parse_args(argv)
    n = args.files if args.files is not None else (100 if args.quick else 400)
    root = write_files(n, per_file=args.per_file)
    load = os.getloadavg()[0]
    print(f"{n} SciFact abstracts as .txt, {args.per_file} per file; embedding server in its own process, {args.delay * 1000:.0f} ms per "
          f"request of up to 128 texts; {psutil.cpu_count()} cores, load average {load:.1f} at the start"
          + (" (a loaded machine: compare the rows of one run)" if load > 1 else ""))
    with embedding_server(args.delay) as base_url:
        skip = [c.pid for c in psutil.Process().children()]  # the embedding server
        if args.distributed:
            distributed_section(root, base_url, skip)
        else:
            server_section(root, base_url, args.rounds, args.concurrency, args.readers, skip)


if __name__ == "__main__":
    main()
