"""``convrag bench embed`` (the local model's throughput and query latency, measured now) and ``convrag bench list``
(the benchmark scripts of a source checkout and how to run them)."""

from __future__ import annotations

import ast
import statistics
import time
from pathlib import Path
from typing import Any, List, Optional

from llama_index_convrag.cli_commands.common import EXIT_INPUT, EXIT_USAGE, CLIError, Output, embed_model

_SENTENCES = (
    "Milvus stores one row per chunk with a dense embedding and a BM25 sparse vector built from the text.",
    "The chat engine rewrites a follow-up question into a standalone retrieval query using recent turns.",
    "Hybrid search fuses dense and sparse rankings with reciprocal rank fusion or a weighted sum.",
    "A token budget trims the oldest history first and then the lowest-ranked chunks, never the question.",
    "Citations are bound to the assistant message id and can be read back after reopening the database.",
    "Streaming answers start with a placeholder that is finalised as complete, error or cancelled.",
    "Evaluation replays conversations and reports nDCG, recall and MRR for each rewrite strategy.",
    "The local MiniLM model runs on onnxruntime and produces normalised 384-dimensional vectors.",
)


def _passages(n: int, words: int) -> List[str]:
    """``n`` distinct passages of about ``words`` words, built from fixed sentences (deterministic)."""
    out = []
    for i in range(n):
        parts: List[str] = [f"Passage {i}."]
        j = i
        while sum(len(p.split()) for p in parts) < words:
            parts.append(_SENTENCES[j % len(_SENTENCES)])
            j = j * 7 + 3
        out.append(" ".join(parts))
    return out


def cmd_bench_embed(args: Any, out: Output) -> int:
    if args.passages < 1 or args.queries < 1 or args.batch_size < 1:
        raise CLIError(EXIT_USAGE, f"--passages, --queries and --batch-size must be >= 1, got "
                                   f"{args.passages}, {args.queries}, {args.batch_size}")
    model = embed_model()
    if hasattr(model, "query_cache_size"):
        model.query_cache_size = 0  # every query pays its embedding
    name = getattr(model, "model_name", type(model).__name__)
    passages = _passages(args.passages, args.words)
    model.get_text_embedding("warm-up")
    started = time.perf_counter()
    for i in range(0, len(passages), args.batch_size):
        model.get_text_embedding_batch(passages[i : i + args.batch_size])
    embed_s = time.perf_counter() - started
    latencies = []
    for i in range(args.queries):
        t0 = time.perf_counter()
        model.get_query_embedding(f"what does the chat engine do with follow-up question number {i}?")
        latencies.append((time.perf_counter() - t0) * 1000.0)
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(round(0.95 * (len(latencies) - 1))))]
    result = {"model": name, "passages": len(passages), "words_per_passage": args.words,
              "batch_size": args.batch_size, "embed_seconds": round(embed_s, 3),
              "passages_per_second": round(len(passages) / embed_s, 2), "queries": len(latencies),
              "query_p50_ms": round(statistics.median(latencies), 2), "query_p95_ms": round(p95, 2),
              "query_mean_ms": round(statistics.fmean(latencies), 2)}
    if out.json_mode:
        out.json(result)
        return 0
    out.text(f"model {name}: {len(passages)} passages of ~{args.words} words, batch {args.batch_size}")
    out.text(f"passage embedding: {result['passages_per_second']:.1f} passages/s ({embed_s:.2f} s)")
    out.text(f"query embedding ({len(latencies)} queries, no cache): p50 {result['query_p50_ms']:.2f} ms, "
             f"p95 {result['query_p95_ms']:.2f} ms, mean {result['query_mean_ms']:.2f} ms")
    return 0


def find_bench_dir(start: Optional[Path] = None) -> Optional[Path]:
    """``bench/`` of the llama-index-convrag checkout containing ``start`` (default: the working directory)."""
    here = (start if start is not None else Path.cwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / "bench").is_dir() and (folder / "llama_index_convrag").is_dir():
            return folder / "bench"
    return None


def _summary(path: Path) -> str:
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (SyntaxError, UnicodeDecodeError):
        doc = None
    return doc.strip().splitlines()[0] if doc else "(no docstring)"


def cmd_bench_list(args: Any, out: Output) -> int:
    bench = find_bench_dir()
    if bench is None:
        raise CLIError(EXIT_INPUT, "no bench/ folder here: run 'convrag bench list' from a llama-index-convrag "
                                   "source checkout (the scripts are not installed with the package)")
    scripts = sorted(p for p in bench.glob("*.py") if not p.name.startswith("_"))
    rows = [{"script": f"bench/{p.name}", "summary": _summary(p),
             "quick": "--quick" in p.read_text(encoding="utf-8"),
             "command": f"PYTHONPATH=. python bench/{p.name}"} for p in scripts]
    if out.json_mode:
        out.json({"checkout": str(bench.parent), "scripts": rows})
        return 0
    out.text(f"benchmarks in {bench} (run from {bench.parent}):")
    for r in rows:
        out.text(f"  {r['script']:28s} {r['summary']}")
        out.text(f"      {r['command']}" + (" [--quick]" if r["quick"] else ""))
    return 0
