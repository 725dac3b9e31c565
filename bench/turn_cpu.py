"""CPU time and Python calls per chat turn of the engine ``tests/serve/server_app.py`` builds (the one the load bench
serves: its documents in Milvus Lite, the local embedding model, a SQLite store, a ScriptedLLM answering and another
rewriting follow-ups, ``similarity_top_k=2``, every other option the engine's default), in-process, no HTTP.

Each measured code and variant runs in its own process (``--role child``), set up once, one after another (ingest,
engine, 5 warm-up turns), then driven in rounds that alternate between the processes (the order reversed every other
round): one round is ``--turns`` turns, conversations of 6 turns of the load bench's questions, ``astream_chat`` read
to its end on one event loop (uvloop when installed), the store's calls on the loop as the server makes a SQLite
store's (``--concurrency`` conversations at once; ``--sync``: ``chat``). Per round and process: CPU ms per turn of the
process (all its threads), of its main thread (the loop), and of the Milvus Lite server it started (a child process:
not in the process's own figure). After the timed rounds, one round under cProfile (every thread of the process):
Python calls per turn; and counted in every round: Milvus client calls (sync and async clients, by method) and SQL
statements per turn.

Variants (current code only; each switches a round-4 feature off through its option): ``no-widen``
(``AnswerOptions(widen=None)``: no neighbour widening). ``--against DIR`` (repeatable) adds another checkout of the
package (``git worktree add --detach /tmp/old 461b7dc``), run with ``PYTHONPATH=DIR``, default variant only; its
engine is built with whichever chat surface it has (option objects, or the keywords before them).

The bench asserts it measured the path it names: every measured turn streamed the scripted answer and had sources
(retrieval ran); the profiled round of ``default`` went through the widening and that of ``no-widen`` never.

    python bench/turn_cpu.py                                     # current code: default and each feature off
    python bench/turn_cpu.py --against /tmp/old --variants default --rounds 5   # beside another checkout
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]

QUESTIONS = ("What is BM25?", "And how does fusion merge lists?", "Where is Milvus Lite stored?",
             "Which one scales out?")
TURNS_PER_CONVERSATION = 6
WARMUP_TURNS = 5
VARIANTS = ("default", "no-widen")
#: Milvus client methods counted per turn (sync and async clients)
MILVUS_METHODS = ("search", "hybrid_search", "query", "get", "describe_collection", "has_collection",
                  "load_collection", "get_load_state", "get_collection_stats", "list_collections", "flush")
#: a function of the profiled round -> how often a turn each variant runs it (1: at least once; 0: never)
#: (the async widening runs its fetch in a worker thread, which cProfile does not see: its hop is counted)
EXPECT = {"default": {("widen.py", "fetch"): 1.0}, "no-widen": {("widen.py", "fetch"): 0.0}}
AEXPECT = {"default": {("widen.py", "_apostprocess_nodes"): 1.0}, "no-widen": {("widen.py", "_apostprocess_nodes"): 0.0}}


# --- the child: one code, one variant ---------------------------------------------------------------------------
class Child:
    """The engine over the load bench's documents, and the turns it runs."""

    def __init__(self, variant: str, sync: bool, concurrency: int, dump: Optional[str]) -> None:
        from tests.serve.server_app import ANSWER, DOCS, REWRITE
        import llama_index_convrag.chat as chat
        from llama_index_convrag.embeddings import LocalMiniLMEmbedding
        from llama_index_convrag.indices import ConvRAGIndex
        from llama_index_convrag.ingest import ingest
        from llama_index_convrag.milvus.client import connect_milvus, resolve_milvus
        from llama_index_convrag.storage.conversation import SQLiteConversationStore
        from llama_index_convrag.testing import ScriptedLLM

        self.sync, self.concurrency, self.answer, self.dump = sync, concurrency, ANSWER, dump
        self.work = tempfile.TemporaryDirectory(prefix="turn_cpu_")
        root = Path(self.work.name)
        (root / "docs").mkdir()
        for name, text in DOCS.items():
            (root / "docs" / name).write_text(text)
        target = resolve_milvus(str(root / "milvus.db"))
        client = connect_milvus(target)
        model = LocalMiniLMEmbedding()
        ingest([root / "docs"], collection_name="serve_docs", embed_model=model, client=client, target=target)
        self.store = SQLiteConversationStore(str(root / "chats.db"))
        index = ConvRAGIndex.from_collection("serve_docs", embed_model=model, client=client, target=target)
        llm, rewriter = ScriptedLLM.fixed(ANSWER), ScriptedLLM.fixed(REWRITE)
        if hasattr(chat, "RewriteOptions"):  # the option objects' surface
            answer = chat.AnswerOptions(widen=None) if variant == "no-widen" else None
            self.template = index.as_chat_engine(conversation_store=self.store, llm=llm, answer=answer,
                                                 rewrite=chat.RewriteOptions(llm=rewriter),
                                                 retriever_kwargs={"similarity_top_k": 2})
        else:  # the keywords before them
            if variant != "default":
                raise SystemExit(f"variant {variant!r} needs the option objects; this code has only 'default'")
            self.template = index.as_chat_engine(conversation_store=self.store, llm=llm, condense_llm=rewriter,
                                                 similarity_top_k=2)
        self.loop_port = _loop_port()
        self.runner = asyncio.Runner(loop_factory=_loop_factory())  # one loop for every round, as a server has
        self.turns(WARMUP_TURNS)
        self.counts: Counter = Counter()
        self._count_calls()

    def _count_calls(self) -> None:
        """Count the Milvus client calls (sync and async clients, by method) and the SQL statements of the store."""
        from pymilvus import AsyncMilvusClient, MilvusClient

        counts = self.counts

        def counted(cls: Any, name: str) -> None:
            fn = getattr(cls, name, None)
            if fn is None:
                return
            if asyncio.iscoroutinefunction(fn):
                async def wrapper(*a: Any, **k: Any) -> Any:
                    counts[f"milvus {name}"] += 1
                    return await fn(*a, **k)
            else:
                def wrapper(*a: Any, **k: Any) -> Any:  # type: ignore[misc]
                    counts[f"milvus {name}"] += 1
                    return fn(*a, **k)
            setattr(cls, name, wrapper)

        for cls in (MilvusClient, AsyncMilvusClient):
            for name in MILVUS_METHODS:
                counted(cls, name)
        if getattr(self.store, "_conn", None) is None:
            raise AssertionError("the store has no open sqlite3 connection to count statements on")
        self.store._conn.set_trace_callback(lambda sql: counts.update(("sql",)))

    def take_counts(self, n: int) -> Dict[str, float]:
        out = {k: v / n for k, v in sorted(self.counts.items())}
        self.counts.clear()
        return out

    def conversation(self, turns: int) -> List[Tuple[str, int]]:
        engine = self.template.for_conversation(self.store.create_conversation("bench").id)
        seen = []
        for t in range(turns):
            response = engine.chat(QUESTIONS[t % len(QUESTIONS)])
            seen.append((str(response.response), len(response.source_nodes)))
        return seen

    async def aconversation(self, turns: int) -> List[Tuple[str, int]]:
        cid = self.store.create_conversation("bench").id
        engine = (self.template.for_conversation(cid) if self.loop_port is None
                  else self.template.for_conversation(cid, port=self.loop_port(self.store)))
        seen = []
        for t in range(turns):
            response = await engine.astream_chat(QUESTIONS[t % len(QUESTIONS)])
            text = "".join([delta async for delta in response.async_response_gen()])
            seen.append((text, len(response.source_nodes)))
        return seen

    def turns(self, n: int) -> None:
        sizes = [TURNS_PER_CONVERSATION] * (n // TURNS_PER_CONVERSATION) + (
            [n % TURNS_PER_CONVERSATION] if n % TURNS_PER_CONVERSATION else [])
        if self.sync:
            seen = [s for size in sizes for s in self.conversation(size)]
        else:
            seen = self.runner.run(self._gather(sizes))
        first = self.answer.split("[")[0].strip()
        for text, sources in seen:  # the path: the scripted answer streamed, retrieval found sources
            if first not in text or sources == 0:
                raise AssertionError(f"a turn did not stream the scripted answer with sources: {text[:80]!r}, "
                                     f"{sources} sources")

    async def _gather(self, sizes: List[int]) -> List[Tuple[str, int]]:
        out: List[Tuple[str, int]] = []
        for start in range(0, len(sizes), self.concurrency):
            for seen in await asyncio.gather(*[self.aconversation(s) for s in sizes[start:start + self.concurrency]]):
                out.extend(seen)
        return out

    def timed(self, n: int) -> Dict[str, float]:
        import psutil

        me = psutil.Process()
        milvus = [p for p in me.children(recursive=True)]

        def child_cpu() -> float:
            total = 0.0
            for p in milvus:
                try:
                    t = p.cpu_times()
                    total += t.user + t.system
                except psutil.NoSuchProcess:
                    pass
            return total

        main = threading.get_native_id()

        def main_cpu() -> float:
            for t in me.threads():
                if t.id == main:
                    return t.user_time + t.system_time
            raise AssertionError("the main thread is not among the process's threads")

        cpu0, main0, milvus0, wall0 = time.process_time(), main_cpu(), child_cpu(), time.perf_counter()
        self.turns(n)
        out = {"cpu_ms": (time.process_time() - cpu0) / n * 1e3, "main_ms": (main_cpu() - main0) / n * 1e3,
               "milvus_ms": (child_cpu() - milvus0) / n * 1e3, "wall_ms": (time.perf_counter() - wall0) / n * 1e3}
        self.take_counts(n)
        return out

    def profiled(self, n: int) -> Dict[str, Any]:
        profiles: List[cProfile.Profile] = []

        def in_thread(*_: Any) -> None:  # each thread started during the round profiles itself (the worker threads)
            sys.setprofile(None)
            profiles.append(cProfile.Profile())
            profiles[-1].enable()

        threading.setprofile(in_thread)
        self.runner.get_loop().set_default_executor(ThreadPoolExecutor())  # new worker threads, profiled
        profile = cProfile.Profile()
        profile.enable()
        self.turns(n)
        profile.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
        merged = pstats.Stats(profile, *profiles)
        if self.dump:
            merged.dump_stats(self.dump)
        stats = merged.stats  # type: ignore[attr-defined]
        own_by: Dict[str, float] = {}
        functions: Dict[str, float] = {}
        for (path, _, name), (_, calls, own, _, _) in stats.items():
            where = _where(path, name)
            own_by[where] = own_by.get(where, 0.0) + own
            key = f"{Path(path).name}:{name}"
            functions[key] = functions.get(key, 0.0) + calls / n
        total_calls = sum(v[1] for v in stats.values())
        return {"calls": total_calls / n, "counts": self.take_counts(n), "own_ms": {
            k: v / n * 1e3 for k, v in sorted(own_by.items(), key=lambda kv: -kv[1])}, "functions": functions}


def _loop_factory() -> Any:
    """The event loop ``convrag serve`` runs on (uvloop when installed)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def _loop_port() -> Any:
    """A turn port whose async calls run the store's on the loop, as the server runs a SQLite store's (None: the code
    has no turn port; its engine calls the store itself)."""
    try:
        from llama_index_convrag.chat.port import StoreTurnPort
    except ImportError:
        return None

    class LoopPort(StoreTurnPort):
        async def aload(self, request: Any) -> Any:
            return self.load(request)

        async def acommit(self, outcome: Any) -> None:
            self.commit(outcome)

    return LoopPort


def _where(path: str, name: str) -> str:
    """The package a profiled function belongs to (its own time is summed per package)."""
    if "llama_index_convrag" in path:
        parts = path.split("llama_index_convrag/")[-1].split("/")
        return "convrag/" + (parts[0] if len(parts) > 1 else parts[0].removesuffix(".py"))
    for lib in ("pymilvus", "grpc", "llama_index_instrumentation", "llama_index", "pydantic", "onnxruntime",
                "tokenizers", "tiktoken", "nltk", "regex", "langid", "py3langid", "Stemmer", "jieba", "sqlalchemy",
                "asyncio", "uvloop"):
        if f"/{lib}/" in path:
            return lib
    if path == "~":
        if "sqlite3" in name:
            return "sqlite3"
        return "builtins"
    return "other"


def child_main(args: argparse.Namespace) -> None:
    child = Child(args.variant, args.sync, args.concurrency, args.dump)
    print("ready", flush=True)
    for line in sys.stdin:
        kind, n = line.split()
        out = child.timed(int(n)) if kind == "time" else child.profiled(int(n))
        print(json.dumps(out), flush=True)


# --- the parent: alternating rounds ------------------------------------------------------------------------------
class Runner:
    def __init__(self, label: str, code: Path, variant: str, args: argparse.Namespace) -> None:
        self.label, self.variant = label, variant
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(code), str(ROOT)) if p)}
        command = [sys.executable, str(Path(__file__).resolve()), "--role", "child", "--variant", variant,
                   "--concurrency", str(args.concurrency)] + (["--sync"] if args.sync else []) + (
            ["--dump", str(Path(args.dump_dir).resolve() / f"{label.replace(' ', '-')}.pstats")] if args.dump_dir else [])
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=str(code))
        self.rounds: List[Dict[str, float]] = []
        self.profile: Optional[Dict[str, Any]] = None

    def ask(self, kind: str, n: int) -> Dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{kind} {n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label}: the child process exited ({self.proc.wait()})")
        return json.loads(line)

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"{self.label}: the child did not start ({self.proc.wait()})")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def check_path(runner: Runner, sync: bool) -> None:
    profile = runner.profile
    assert profile is not None
    for (module, name), want in (EXPECT if sync else AEXPECT).get(runner.variant, {}).items():
        got = sum(v for k, v in profile["functions"].items() if k == f"{module}:{name}")
        if (got >= want) if want else (got == 0):
            continue
        raise AssertionError(f"{runner.label}: {module}:{name} ran {got} times a turn, expected "
                             f"{f'at least {want}' if want else 'never'}")


def parent_main(args: argparse.Namespace) -> int:
    codes = [("current", ROOT)] + [(Path(a).resolve().name, Path(a).resolve()) for a in args.against]
    runners: List[Runner] = []
    try:
        for label, code in codes:  # one set-up at a time (a Milvus Lite server starting beside three others can time out)
            for variant in args.variants if label == "current" else ["default"]:
                runners.append(Runner(f"{label} {variant}", code, variant, args))
                runners[-1].wait_ready()
        for r in range(args.rounds):
            order = runners if r % 2 == 0 else list(reversed(runners))
            for runner in order:
                runner.rounds.append(runner.ask("time", args.turns))
        for runner in runners:
            runner.profile = runner.ask("profile", args.turns)
    finally:
        for runner in runners:
            runner.close()
    report(runners, args)
    for runner in runners:
        if runner.label.startswith("current"):
            check_path(runner, args.sync)
    return 0


def report(runners: List[Runner], args: argparse.Namespace) -> None:
    print(f"{args.turns} turns a round, {args.rounds} rounds alternating, "
          f"{'chat' if args.sync else f'astream_chat x{args.concurrency} conversations at once'}; "
          f"load average before: {args.load}")
    print(f"{'':22} {'CPU ms/turn':>24} {'main thread':>12} {'Milvus Lite':>12} {'wall ms':>8} {'calls/turn':>10} "
          f"{'Milvus calls':>13} {'SQL/turn':>8}")
    for runner in runners:
        cpu = [x["cpu_ms"] for x in runner.rounds]
        med = {k: statistics.median(x[k] for x in runner.rounds) for k in runner.rounds[0]}
        profile = runner.profile or {}
        print(f"{runner.label:22} {med['cpu_ms']:8.2f} ({min(cpu):5.2f}-{max(cpu):5.2f}) {med['main_ms']:12.2f} "
              f"{med['milvus_ms']:12.2f} {med['wall_ms']:8.1f} {profile['calls']:10.0f} "
              f"{sum(v for k, v in profile['counts'].items() if k.startswith('milvus')):13.1f} "
              f"{profile['counts'].get('sql', 0.0):8.1f}")
    for runner in runners:
        profile = runner.profile or {}
        milvus = ", ".join(f"{k.split()[1]} {v:g}" for k, v in profile["counts"].items() if k.startswith("milvus"))
        print(f"{runner.label}: Milvus calls a turn: {milvus}")
        if args.top:
            print("  own time a turn under cProfile, ms: " + ", ".join(
                f"{k} {v:.2f}" for k, v in list(profile["own_ms"].items())[:args.top]))
        if args.functions:
            top = sorted(profile["functions"].items(), key=lambda kv: -kv[1])[:args.functions]
            print("  calls a turn: " + ", ".join(f"{k} {v:g}" for k, v in top))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=("parent", "child"), default="parent")
    parser.add_argument("--variant", default="default", choices=VARIANTS)
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"the current code's variants, comma-separated (of {', '.join(VARIANTS)})")
    parser.add_argument("--against", action="append", default=[],
                        help="another checkout of the package, run beside this one (repeatable)")
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1, help="conversations at once (astream_chat)")
    parser.add_argument("--sync", action="store_true", help="chat() instead of astream_chat()")
    parser.add_argument("--top", type=int, default=0,
                        help="packages shown by their own time under cProfile (waits included: for reading only)")
    parser.add_argument("--functions", type=int, default=0, help="functions shown by calls a turn")
    parser.add_argument("--dump-dir", default=None, help="write each process's profiled round here (pstats files)")
    parser.add_argument("--dump", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "child":
        child_main(args)
        return 0
    args.variants = [v for v in args.variants.split(",") if v]
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad or args.turns < 1 or args.rounds < 1 or args.concurrency < 1:
        parser.error(f"variants {bad} not among {list(VARIANTS)}, or --turns/--rounds/--concurrency below 1")
    args.load = f"{os.getloadavg()[0]:.2f}"
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
