"""The service's own CPU a streamed turn, in one process: ``tests/serve/server_app.py``'s app (real Milvus Lite, the
local embedding model, a ScriptedLLM without token delay (``--token-ms``: with), a SQLite store, one API key) under uvicorn on 127.0.0.1,
driven by an httpx client on the same event loop: ``--rounds`` rounds of ``--concurrency`` conversations, one turn
each. Prints the process's CPU ms a turn (client, server and engine together: compare two runs of this script on two
checkouts, alternating: ``--against``) and, with ``--profile``, cProfile's own time a turn grouped by part (the
service's modules, the conversation store, the web framework, the rate limiter, the engine and the rest) and the
service's functions ranked by cumulative time.

``--against DIR`` (repeatable: another checkout of the package, ``git worktree add --detach /tmp/old 461b7dc``) runs
each code in its own process (``--code DIR``, ``PYTHONPATH=DIR``: its package and its ``tests/serve/server_app.py``),
``--runs`` times, alternating (the order reversed every other run), and prints each run's figure and each code's
median.

    python bench/serve_cpu.py --rounds 20 --concurrency 8
    python bench/serve_cpu.py --rounds 5 --profile --files 20 --dump /tmp/turn.prof
    python bench/serve_cpu.py --rounds 10 --concurrency 8 --against /tmp/old --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]

#: file path fragments -> part of a turn (first match wins)
PARTS: Tuple[Tuple[str, str], ...] = (
    ("llama_index_convrag/serve/", "service"),
    ("llama_index_convrag/storage/", "store"),
    ("sqlite3", "store"),
    ("/limits/", "rate limiter"),
    ("/fastapi/", "framework"), ("/starlette/", "framework"), ("/uvicorn/", "framework"), ("/h11/", "framework"),
    ("/anyio/", "framework"),
    ("/httpx/", "client"), ("/httpcore/", "client"),
    ("llama_index_convrag/", "engine"), ("/llama_index/", "engine"), ("/pymilvus/", "engine"),
    ("/grpc/", "engine"), ("/torch/", "engine"), ("/transformers/", "engine"), ("/sentence_transformers/", "engine"),
)


def _part(filename: str) -> str:
    for fragment, part in PARTS:
        if fragment in filename:
            return part
    return "other"


async def drive(rounds: int, concurrency: int, profile: bool,
                key: str) -> Tuple[float, int, Optional[cProfile.Profile]]:
    """``(process CPU seconds, turns, the profile)`` of ``rounds`` rounds of ``concurrency`` turns, ``key``'s."""
    import httpx
    import uvicorn

    from tests.serve.server_app import create

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create(), host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as client:
        cids: List[str] = []
        for _ in range(concurrency):
            r = await client.post("/v1/conversations", json={})
            r.raise_for_status()
            cids.append(r.json()["id"])

        async def turn(cid: str) -> None:
            async with client.stream("POST", f"/v1/conversations/{cid}/messages",
                                     json={"content": "What is BM25?"}) as resp:
                resp.raise_for_status()
                body = b"".join([chunk async for chunk in resp.aiter_bytes()])
            assert b"event: done" in body, body[-300:]

        await asyncio.gather(*(turn(c) for c in cids))  # warm: engines, caches
        profiler = cProfile.Profile(time.thread_time) if profile else None  # CPU of the loop thread
        began = time.process_time()
        if profiler is not None:
            profiler.enable()
        for _ in range(rounds):
            await asyncio.gather(*(turn(c) for c in cids))
        if profiler is not None:
            profiler.disable()
        spent = time.process_time() - began
    server.should_exit = True
    await task
    return spent, rounds * concurrency, profiler


def report(profiler: cProfile.Profile, turns: int, top: int, files: int) -> None:
    """Print the profile's own time a turn by part, the top files outside the service and its top functions."""
    stats = pstats.Stats(profiler)
    by_part: Dict[str, float] = {}
    calls: Dict[str, int] = {}
    serve: List[Tuple[float, float, int, str]] = []
    for (filename, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        part = _part(filename)
        by_part[part] = by_part.get(part, 0.0) + tottime
        calls[part] = calls.get(part, 0) + ncalls
        if part in ("service", "store"):
            short = filename.split("llama_index_convrag/")[-1]
            serve.append((cumtime, tottime, ncalls, f"{short}:{line} {name}"))
    print("profiled own time a turn by part (ms; calls a turn):")
    for part, t in sorted(by_part.items(), key=lambda kv: -kv[1]):
        print(f"  {part:<13} {1000 * t / turns:7.3f} ms  {calls[part] / turns:8.1f} calls")
    if files:
        print(f"the framework's and the rest's files by own time a turn (top {files}; ms):")
        by_file: Dict[str, float] = {}
        for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
            if _part(filename) in ("other", "framework"):
                by_file[filename] = by_file.get(filename, 0.0) + tottime
        for f, t in sorted(by_file.items(), key=lambda kv: -kv[1])[:files]:
            print(f"  {1000 * t / turns:7.3f}  {f}")
    print(f"the service's and store's functions by cumulative time a turn (top {top}; ms cum / own, calls):")
    for cum, own, n, where in sorted(serve, reverse=True)[:top]:
        print(f"  {1000 * cum / turns:7.3f} / {1000 * own / turns:6.3f}  {n / turns:6.1f}  {where}")


def side_by_side(args: argparse.Namespace) -> int:
    """Run this script once per code and run, alternating, and print each code's CPU ms a turn."""
    codes = [("current", ROOT)] + [(Path(a).resolve().name, Path(a).resolve()) for a in args.against]
    figures: Dict[str, List[float]] = {label: [] for label, _ in codes}
    for run in range(args.runs):
        for label, code in (codes if run % 2 == 0 else codes[::-1]):
            command = [sys.executable, str(Path(__file__).resolve()), "--code", str(code), "--rounds", str(args.rounds),
                       "--concurrency", str(args.concurrency), "--token-ms", repr(args.token_ms)]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(code), str(ROOT)))}
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            found = re.search(r"process CPU ([0-9.]+) ms a turn", done.stdout)
            assert found is not None, done.stdout[-2000:] + done.stderr[-2000:]
            figures[label].append(float(found.group(1)))
            print(f"run {run + 1} {label:<18} {found.group(1)} ms a turn  (load average {os.getloadavg()[0]:.1f})",
                  flush=True)
    for label, values in figures.items():
        print(f"{label:<18} median {statistics.median(values):.2f} ms a turn "
              f"(range {min(values):.2f}-{max(values):.2f}, {len(values)} runs)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--token-ms", type=float, default=0.0,
                        help="the scripted LLM's delay per token (the load bench's is 5; default 0)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=30, help="the service's functions shown (with --profile)")
    parser.add_argument("--files", type=int, default=0, help="the framework's and other files shown (--profile)")
    parser.add_argument("--dump", type=Path, default=None, help="write the profile here (pstats; with --profile)")
    parser.add_argument("--against", action="append", default=[], type=Path,
                        help="another checkout, measured in alternating runs (repeatable)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each code (with --against)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout measured (its package and server app)")
    args = parser.parse_args()
    if args.against:
        return side_by_side(args)
    sys.path.insert(0, str(args.code.resolve()))
    import llama_index_convrag
    from llama_index_convrag.storage.conversation import SQLiteConversationStore

    package = Path(llama_index_convrag.__file__).resolve()
    assert package.is_relative_to(args.code.resolve()), f"measured {package}, not the code of {args.code}"

    with tempfile.TemporaryDirectory() as work:
        store = SQLiteConversationStore(Path(work) / "chats.db")
        store.open()
        _, key = store.create_key("bench")
        store.close()
        os.environ.update(CONVRAG_TEST_DIR=work, CONVRAG_TEST_STORE=str(Path(work) / "chats.db"),
                          CONVRAG_TEST_TOKEN_DELAY=repr(args.token_ms / 1000))
        spent, turns, profiler = asyncio.run(drive(args.rounds, args.concurrency, args.profile, key))
    print(f"{turns} turns ({args.concurrency} at once): process CPU {1000 * spent / turns:.2f} ms a turn"
          + (" (profiled)" if profiler is not None else ""))
    if profiler is not None:
        report(profiler, turns, args.top, args.files)
        if args.dump is not None:
            profiler.dump_stats(str(args.dump))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
