"""Local ingest of another checkout of the package beside this one's model variants, each run in its own process.

The same SciFact abstracts (written as .txt files once) are ingested into a fresh Milvus Lite file by each arm in
turn, the arms alternating round by round: ``base`` (the package at ``--base``, an earlier commit's checkout, with
its own default model), ``fp32`` (this checkout's default), ``int8`` (this checkout's int8 variant) and each
``--recipe`` (an int8 copy made with this checkout's quantizer; a ``_recipes.py`` spec such as
``ffn_out<=2:int8:static``). Each arm's process loads and warms its model before the timed
ingest, then times the model alone on the stored chunk texts (one ``embed`` call; wall and CPU time). Prints per
round and the medians, with the load average, and each arm over ``base`` in the same round.

    PYTHONPATH=. python bench/ingest_checkouts.py --base /tmp/convrag-461b7dc --rounds 3 \\
        --recipe 'ffn_out<=2:int8:static'
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def run_arm(arm: str, files: Path) -> Dict[str, float]:
    """In this process (the child): build ``arm``'s model, warm it, ingest ``files`` into a fresh Milvus Lite file,
    then time one ``embed`` call on the stored chunk texts."""
    from pymilvus import MilvusClient

    import llama_index_convrag
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
    from llama_index_convrag.ingest.pipeline import ingest

    root = Path(os.environ["INGEST_ARM_ROOT"]).resolve()
    package = Path(llama_index_convrag.__file__).resolve()
    assert root in package.parents, f"arm {arm} imported {package}, not the package under {root}"
    if arm in ("base", "fp32"):
        model = LocalMiniLMEmbedding()
    elif arm == "int8":
        model = LocalMiniLMEmbedding(variant="int8")
    else:
        sys.path.insert(0, str(HERE))
        from _recipes import spec_model

        model = spec_model(arm)[1]
    if arm != "base":
        import onnx

        integer = sum(n.op_type in ("MatMulInteger", "QuantizeLinear") for n in onnx.load(model.onnx_path).graph.node)
        assert (integer > 0) == (arm != "fp32"), f"arm {arm} runs {integer} int8 nodes"
    model.warm_up()
    with tempfile.TemporaryDirectory(prefix="ingest-arm-") as tmp:
        client = MilvusClient(str(Path(tmp) / "arm.db"))
        c0 = time.process_time()
        rep = ingest([files], client=client, collection_name="arm", embed_model=model)
        ingest_cpu = time.process_time() - c0
        texts = [r["text"] for r in client.query("arm", filter='id != ""', output_fields=["text"], limit=16384)]
        t0, c0 = time.perf_counter(), time.process_time()
        model.embed(texts)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        client.close()
    return {"chunks": rep.chunks, "ingest_s": rep.total_seconds, "ingest_cpu_s": ingest_cpu,
            "ingest_chunks_per_s": rep.chunks / rep.total_seconds, "model_chunks_per_s": len(texts) / wall,
            "model_cpu_s": cpu, "load": os.getloadavg()[0]}


def spawn(arm: str, files: Path, base: Path) -> Dict[str, float]:
    root = base if arm == "base" else ROOT
    env = dict(os.environ, PYTHONPATH=str(root), INGEST_ARM_ROOT=str(root))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", arm, "--files-dir", str(files)],
                         env=env, cwd=root, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"arm {arm} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, help="the other checkout's root (its package and default model)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=100, help="SciFact abstracts ingested per arm")
    ap.add_argument("--no-int8", action="store_true", help="leave out this checkout's int8 variant")
    ap.add_argument("--recipe", action="append", default=[], metavar="SPEC", help="an int8 recipe (_recipes.py)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--files-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_arm(args.child, Path(args.files_dir))))
        return
    if args.base is None or not (args.base / "llama_index_convrag").is_dir():
        ap.error(f"--base must be a checkout of the package, got {args.base}")
    sys.path.insert(0, str(HERE))
    from ingest_server import write_files

    files = write_files(args.files, "ingest_checkouts") / "files"
    arms = ["base", "fp32"] + ([] if args.no_int8 else ["int8"]) + args.recipe
    results: Dict[str, List[Dict[str, float]]] = {a: [] for a in arms}
    print(f"{args.files} SciFact abstracts as .txt; base = {args.base}; one process per arm and round")
    print(f"{'round':>5s} {'arm':>28s} {'chunks':>6s} {'ingest chunks/s':>15s} {'model chunks/s':>14s} "
          f"{'model CPU s':>11s} {'ingest CPU s':>12s} {'load':>5s}")
    for r in range(args.rounds):
        for arm in (arms if r % 2 == 0 else list(reversed(arms))):
            res = spawn(arm, files, args.base)
            results[arm].append(res)
            print(f"{r:5d} {arm[:28]:>28s} {res['chunks']:6d} {res['ingest_chunks_per_s']:15.1f} "
                  f"{res['model_chunks_per_s']:14.1f} {res['model_cpu_s']:11.1f} {res['ingest_cpu_s']:12.1f} "
                  f"{res['load']:5.1f}", flush=True)
    for arm in arms:
        rows = results[arm]
        print(f"median {arm}: ingest {statistics.median(r['ingest_chunks_per_s'] for r in rows):.1f} chunks/s, "
              f"model alone {statistics.median(r['model_chunks_per_s'] for r in rows):.1f} chunks/s")
    for arm in arms[1:]:
        ratios = {
            "ingest": [a["ingest_chunks_per_s"] / b["ingest_chunks_per_s"]
                       for a, b in zip(results[arm], results["base"])],
            "ingest by CPU time": [b["ingest_cpu_s"] / a["ingest_cpu_s"] for a, b in zip(results[arm], results["base"])],
            "model alone": [a["model_chunks_per_s"] / b["model_chunks_per_s"]
                            for a, b in zip(results[arm], results["base"])],
            "model by CPU time": [b["model_cpu_s"] / a["model_cpu_s"] for a, b in zip(results[arm], results["base"])],
        }
        print(f"{arm} / base per round: " + "; ".join(
            f"{k} {' '.join(f'{x:.2f}' for x in v)} (median {statistics.median(v):.2f})" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
