"""Where ingest's memory goes: peak RSS of this process (Milvus Lite's server is a separate process) at each step.

Each configuration runs in a fresh child process and reports RSS after the imports, after loading the model, and the
peak while ingesting SciFact abstracts as .txt files plus one large text file (whole-file reads):

* ``before``: the local model as it was (32 texts per ONNX run whatever their length, ORT graph optimisation
  ``ORT_ENABLE_ALL`` which folds the int8 weights into fp32 copies, the ORT memory arena on);
* ``arena off``: the same with ORT's CPU memory arena disabled (memory returns to the allocator);
* ``bounded runs``: runs bounded to 8 x 256^2 attention cells (``max_batch_cells``), still ``ORT_ENABLE_ALL``;
* ``bounded + no rewriting``: the same without graph rewriting (the defaults until issue 14's audit);
* ``bounded + no rewriting + arena off``: the same with ORT's CPU memory arena disabled;
* ``4 x 256^2 + no rewriting``: runs bounded to 4 x 256^2 cells, no graph rewriting (the defaults until the query
  latency audit of issue 16);
* ``basic folding 4 x 256^2``: the same with ORT's basic optimisations (constant folding: the int8 weights become fp32
  once at load instead of in every run);
* ``after (default)``: basic optimisations and runs bounded to 2 x 256^2 cells (the defaults now).

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/memory.py [--files 200] [--big-mb 2] [--configs A,B]
    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/memory.py --speed 128    # passages/s with 8, 4 and 2 x 256^2 per run
    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/memory.py --query-latency  # one query, no vs basic optimisation
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import load_scifact  # noqa: E402

CONFIGS = {
    "before": {"max_batch_cells": 10**12, "arena": True, "optimize": "all"},
    "arena off": {"max_batch_cells": 10**12, "arena": False, "optimize": "all"},
    "bounded runs": {"max_batch_cells": 8 * 256 * 256, "arena": True, "optimize": "all"},
    "bounded + no rewriting": {"max_batch_cells": 8 * 256 * 256, "arena": True, "optimize": "none"},
    "bounded + no rewriting + arena off": {"max_batch_cells": 8 * 256 * 256, "arena": False, "optimize": "none"},
    "4 x 256^2 + no rewriting": {"max_batch_cells": None, "arena": True, "optimize": "none"},
    "basic folding 4 x 256^2": {"max_batch_cells": 4 * 256 * 256, "arena": True, "optimize": "basic"},
    "after (default)": {"max_batch_cells": None, "arena": True, "optimize": "basic"},
}
#: ``optimize`` -> ONNX Runtime graph optimisation level.
LEVELS = {"all": "ORT_ENABLE_ALL", "basic": "ORT_ENABLE_BASIC", "none": "ORT_DISABLE_ALL"}


def rss_mb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return -1


def child(folder: str, db: str, config: dict) -> None:
    marks = {"python": rss_mb()}
    import onnxruntime as ort

    from llama_index_convrag.milvus.client import MilvusTarget
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
    from llama_index_convrag.ingest import ingest
    from llama_index_convrag.errors import MilvusConnectionError
    from llama_index_convrag.milvus.client import connect_milvus, forget_clients

    base = ort.SessionOptions

    class Options(base):  # type: ignore[misc, valid-type]
        """The package's session options with this configuration's arena and optimisation level."""

        def __setattr__(self, name: str, value: object) -> None:
            if name == "graph_optimization_level":
                value = getattr(ort.GraphOptimizationLevel, LEVELS[config["optimize"]])
            super().__setattr__(name, value)

        def __init__(self) -> None:
            super().__init__()
            self.enable_cpu_mem_arena = config["arena"]

    ort.SessionOptions = Options
    marks["imports"] = rss_mb()
    kw = {} if config["max_batch_cells"] is None else {"max_batch_cells": config["max_batch_cells"]}
    model = LocalMiniLMEmbedding(**kw)
    model.warm_up()
    marks["model loaded"] = rss_mb()
    for attempt in range(3):  # Milvus Lite's embedded server can fail to start on an overloaded machine
        try:
            client = connect_milvus(MilvusTarget(uri=db), timeout=120)
            break
        except MilvusConnectionError:
            forget_clients()
            if attempt == 2:
                raise
    t0 = time.perf_counter()
    report = ingest([folder], collection_name="mem", embed_model=model, client=client)
    marks["ingest seconds"] = round(time.perf_counter() - t0, 1)
    marks["chunks"] = report.chunks
    marks["after ingest"] = rss_mb()
    marks["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps(marks))


def speed(texts: list, cells: list, rounds: int = 3) -> None:
    """What a tighter bound costs: passages/s of the same texts embedded with each ``max_batch_cells``, the
    configurations alternating within each round (side by side on a loaded machine)."""
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding

    models = {c: LocalMiniLMEmbedding(max_batch_cells=c) for c in cells}
    for m in models.values():
        m.warm_up()
    seconds = {c: 0.0 for c in cells}
    for _ in range(rounds):
        for c, m in models.items():
            t0 = time.perf_counter()
            m.get_text_embedding_batch(texts)
            seconds[c] += time.perf_counter() - t0
    print(f"{len(texts)} SciFact abstracts, {rounds} rounds, configurations alternating\n")
    print("| max_batch_cells | passages/s | relative |\n|---|---|---|")
    for c in cells:
        rate = len(texts) * rounds / seconds[c]
        print(f"| {c // (256 * 256)} x 256^2 | {rate:.1f} | {seconds[cells[0]] / seconds[c]:.2f}x |")


def query_latency(runs: int = 60) -> None:
    """One short query through ONNX Runtime with each graph optimisation level (a fresh session each, same model)."""
    import numpy as np
    import onnxruntime as ort

    from llama_index_convrag.embeddings.local import DEFAULT_TOKENIZER_PATH, _load_tokenizer, default_model_path

    ids = np.array([_load_tokenizer(str(DEFAULT_TOKENIZER_PATH), 256).encode(
        "What about its effects on the immune response? Vitamin D deficiency raises infection risk").ids],
        dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    print(f"one query of {ids.shape[1]} word pieces, {runs} runs per level\n\n| graph optimisation | p50 ms |\n|---|---|")
    for name in ("none", "basic"):
        options = ort.SessionOptions()
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[name])
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(default_model_path()), sess_options=options,
                                       providers=["CPUExecutionProvider"])
        for _ in range(5):
            session.run(None, feed)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            session.run(None, feed)
            times.append(time.perf_counter() - t0)
        print(f"| {LEVELS[name]} | {1000 * sorted(times)[runs // 2]:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=200, help="SciFact abstracts as files (default 200)")
    ap.add_argument("--big-mb", type=float, default=2.0, help="size of the one large text file (default 2 MB)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated subset of {list(CONFIGS)}")
    ap.add_argument("--child", nargs=3, metavar=("FOLDER", "DB", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--speed", type=int, default=0, metavar="N",
                    help="instead: passages/s of N abstracts with 8, 4 and 2 x 256^2 attention cells per run")
    ap.add_argument("--query-latency", action="store_true",
                    help="instead: one short query's ONNX run time without and with basic graph optimisation")
    args = ap.parse_args()
    if args.query_latency:
        query_latency()
        return
    if args.speed:
        speed(load_scifact()[1][: args.speed], [8 * 256 * 256, 4 * 256 * 256, 2 * 256 * 256])
        return
    if args.child:
        child(args.child[0], args.child[1], CONFIGS[args.child[2]])
        return
    _, texts, _, _ = load_scifact()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "files"
        folder.mkdir()
        for i, t in enumerate(texts[: args.files]):
            (folder / f"doc{i:05d}.txt").write_text(t, encoding="utf-8")
        big, i = [], args.files
        while sum(map(len, big)) < args.big_mb * 1e6:
            big.append(texts[i % len(texts)])
            i += 1
        (folder / "big.txt").write_text("\n\n".join(big), encoding="utf-8")
        print(f"{args.files} SciFact abstracts + one {args.big_mb:g} MB text file; RSS of the ingesting process, MB\n")
        print("| configuration | imports | model loaded | peak while ingesting | after | chunks | ingest s |")
        print("|---|---|---|---|---|---|---|")
        for name in args.configs.split(","):
            db = Path(tmp) / (re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") + ".db")  # one per config
            done = subprocess.run([sys.executable, __file__, "--child", str(folder), str(db), name],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                print(f"| {name} | failed: {done.stderr.strip()[-200:]} |")
                continue
            m = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"| {name} | {m['imports']} | {m['model loaded']} | {m['peak']} | {m['after ingest']} | "
                  f"{m['chunks']} | {m['ingest seconds']} |", flush=True)
            db.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
