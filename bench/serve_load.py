"""Load on ``convrag serve``: N concurrent conversations x T turns over HTTP (SSE), beside the same engine in-process.

Three kinds of process, so that no measurement shares an event loop with another: the server (a real uvicorn process,
one worker, SQLite store, Milvus Lite, the local embedding model, built by ``tests/serve/server_app.py``: a
ScriptedLLM whose stream waits ``--token-ms`` per token); the load client (httpx, ``--clients`` processes, by default
one per 32 conversations, the conversations split between them); and the in-process baseline (the same app's engine parts in their own process,
``astream_chat`` at the same concurrency, no HTTP). Runs alternate in-process / HTTP per concurrency level,
``--repeat`` times. 10% of the conversations disconnect mid-stream on their first turn (after 3 deltas). Four users
with API keys own the conversations; after each turn a client reads one conversation of another user (must be 404).

Printed per concurrency (the median over the repeats), HTTP beside in-process: turn time p50 / p95, server overhead
per turn (HTTP p50 / p95 minus in-process p50 / p95), time to the first event (HTTP: the ``start`` event; in-process:
the placeholder stored), the paired overhead (per HTTP turn: the client's turn time minus the engine's time for that
same turn inside the server, from the ``done`` event's ``timings``: what HTTP, the key check, the store calls and
the events add to one turn, but not how much the server's other work slows its engine), the server's own time (per
turn: ``server_ms - engine_ms``: from the request's arrival at the app to its final event, less the engine's time:
routing, the key check, the store calls, the events and the waits for the loop between them), turns per second, and CPU time per turn of the serving process (HTTP: the server process,
which also answers each conversation's creation and the cross-user read; in-process: the baseline process; and the
load client's); then after the drain, read from the store file: user messages stored = sent, messages left
``pending``, ``cancelled`` = disconnects, reads across users that did not answer 404, 5xx.

    python bench/serve_load.py --quick                                 # 32 conversations x 2 turns, once
    python bench/serve_load.py --concurrency 32,128,512 --repeat 2     # 2 turns each; --store-calls threads to compare
    python bench/serve_load.py --memory --concurrency 32,128           # memory off and on side by side
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Tuple

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402

USERS = ("u0", "u1", "u2", "u3")
QUESTIONS = ("What is BM25?", "And how does fusion merge lists?", "Where is Milvus Lite stored?",
             "Which one scales out?")
DISCONNECT_EVERY = 10
#: conversations one load client process drives by default (httpx's pool costs the client more per request as its
#: connections grow: one process for 128 streams spends more CPU per turn than the server)
CONVERSATIONS_PER_CLIENT = 32


@dataclass
class Run:
    """The samples of one run (one client process, or the in-process baseline)."""

    turn_s: List[float] = field(default_factory=list)
    first_s: List[float] = field(default_factory=list)
    #: per answered HTTP turn: the client's turn time minus the engine's time in the server (the done event's timings)
    paired_s: List[float] = field(default_factory=list)
    #: per answered HTTP turn: the server's time for the turn minus the engine's (server_ms - engine_ms)
    own_s: List[float] = field(default_factory=list)
    sent: int = 0
    disconnects: int = 0
    disconnected_ids: List[str] = field(default_factory=list)
    conversation_ids: List[str] = field(default_factory=list)
    errors_5xx: int = 0
    cross_reads_not_404: int = 0
    started: float = 0.0
    ended: float = 0.0
    cpu_s: float = 0.0
    client_cpu_s: float = 0.0

    @classmethod
    def merge(cls, runs: List["Run"]) -> "Run":
        out = cls(started=min(r.started for r in runs), ended=max(r.ended for r in runs))
        for r in runs:
            out.turn_s += r.turn_s
            out.first_s += r.first_s
            out.paired_s += r.paired_s
            out.own_s += r.own_s
            out.disconnected_ids += r.disconnected_ids
            out.conversation_ids += r.conversation_ids
            out.sent, out.disconnects = out.sent + r.sent, out.disconnects + r.disconnects
            out.errors_5xx += r.errors_5xx
            out.cross_reads_not_404 += r.cross_reads_not_404
            out.client_cpu_s += r.client_cpu_s
        return out

    @property
    def turns_per_s(self) -> float:
        return self.sent / (self.ended - self.started)


def pct(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# --- the load client (its own process: --role client) -------------------------------------------------------------
async def http_conversation(client: httpx.AsyncClient, index: int, turns: int, key: str, probe: Tuple[str, str],
                            run: Run) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    r = await client.post("/v1/conversations", json={"title": f"load {index}"}, headers=headers)
    r.raise_for_status()
    cid = r.json()["id"]
    run.conversation_ids.append(cid)
    for t in range(turns):
        disconnect = t == 0 and index % DISCONNECT_EVERY == 0
        start = time.perf_counter()
        first = None
        deltas = 0
        event = ""
        timings: Dict[str, float] = {}
        run.sent += 1
        async with client.stream("POST", f"/v1/conversations/{cid}/messages", headers=headers,
                                 json={"content": QUESTIONS[t % len(QUESTIONS)]}) as resp:
            if resp.status_code >= 500:
                run.errors_5xx += 1
                continue
            async for line in resp.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                    if first is None:
                        first = time.perf_counter() - start
                if event == "done" and line.startswith("data: "):
                    timings = json.loads(line[6:])["timings"]
                if disconnect and line.startswith("data: ") and not deltas and "assistant_message_id" in line:
                    run.disconnected_ids.append(json.loads(line[6:])["assistant_message_id"])
                if line.startswith("event: delta"):
                    deltas += 1
                    if disconnect and deltas == 3:
                        break
        if disconnect:
            run.disconnects += 1
            await wait_settled(client, cid, headers)
        else:
            run.turn_s.append(time.perf_counter() - start)
            if timings:
                run.paired_s.append(run.turn_s[-1] - timings["engine_ms"] / 1000)
                run.own_s.append((timings["server_ms"] - timings["engine_ms"]) / 1000)
        if first is not None:
            run.first_s.append(first)
        peek = await client.get(f"/v1/conversations/{probe[1]}", headers={"Authorization": f"Bearer {key}"})
        if peek.status_code != 404:
            run.cross_reads_not_404 += 1
        if peek.status_code >= 500:
            run.errors_5xx += 1


async def wait_settled(client: httpx.AsyncClient, cid: str, headers: Dict[str, str]) -> None:
    """Until the cancelled turn released its conversation (its message is no longer pending)."""
    for _ in range(500):
        body = (await client.get(f"/v1/conversations/{cid}", headers=headers)).json()
        if all(m["status"] != "pending" for m in body.get("messages", [])):
            return
        await asyncio.sleep(0.02)


async def http_load(url: str, indices: List[int], turns: int, keys: List[str], probe: str, start_at: float) -> Run:
    run = Run()
    limits = httpx.Limits(max_connections=len(indices) + 8, max_keepalive_connections=len(indices) + 8)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        run.started, cpu = time.time(), time.process_time()
        await asyncio.gather(*[http_conversation(client, i, turns, keys[i % len(keys)], ("", probe), run)
                               for i in indices])
        run.ended, run.client_cpu_s = time.time(), time.process_time() - cpu
    return run


# --- the in-process baseline (its own process: --role inproc, one request per stdin line) --------------------------
async def inprocess_load(state: Any, n: int, turns: int) -> Run:
    """The same engine parts and store kind, called directly with the same concurrency (no disconnects); the store
    calls on the event loop, as the server makes a SQLite store's."""
    from llama_index_convrag.chat.port import StoreTurnPort, TurnContext, TurnOutcome, TurnRequest

    class LoopPort(StoreTurnPort):
        """The engine's port over the server's store, its calls on the loop; notes when the turn is stored."""

        def __init__(self, store: Any, began: Dict[str, float]) -> None:
            super().__init__(store)
            self.began = began

        def load(self, request: TurnRequest) -> TurnContext:
            context = super().load(request)
            self.began.setdefault("at", time.perf_counter())
            return context

        async def aload(self, request: TurnRequest) -> TurnContext:
            return self.load(request)

        async def acommit(self, outcome: TurnOutcome) -> None:
            self.commit(outcome)

    from llama_index_convrag.serve.app import register_default_kb

    run = Run()
    kb = register_default_kb(state, "serve_docs")

    async def conversation(i: int) -> None:
        cid = state.store.create_conversation("bench", kb_id=kb.id).id
        for t in range(turns):
            began: Dict[str, float] = {}
            start = time.perf_counter()
            response = await state.engine_for(cid, LoopPort(state.store, began), kb).astream_chat(
                QUESTIONS[t % len(QUESTIONS)])
            async for _ in response.async_response_gen():
                pass
            run.sent += 1
            run.turn_s.append(time.perf_counter() - start)
            run.first_s.append(began["at"] - start)

    run.started, cpu = time.time(), time.process_time()
    await asyncio.gather(*[conversation(i) for i in range(n)])
    run.ended, run.cpu_s = time.time(), time.process_time() - cpu
    return run


def loop_factory() -> Any:
    """The event loop uvicorn's ``--loop auto`` picks (uvloop when installed), for the baseline to run on the same."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def serve_inprocess() -> None:
    from tests.serve.server_app import create

    state = create().state.serve
    print("ready", flush=True)
    for line in sys.stdin:
        n, turns = (int(x) for x in line.split())
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            print(json.dumps(asdict(runner.run(inprocess_load(state, n, turns)))), flush=True)


# --- the orchestrator ------------------------------------------------------------------------------------------------
def run_clients(url: str, n: int, turns: int, keys: List[str], probe: str, processes: int) -> Run:
    start_at = time.time() + 3.0  # every client process imported and connected before the first request
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--role", "client", "--url", url, "--turns", str(turns), "--probe", probe,
         "--keys", ",".join(keys), "--indices", ",".join(str(i) for i in range(p, n, processes)),
         "--start-at", repr(start_at)], stdout=subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)})
        for p in range(processes)]
    runs = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"load client exited {proc.returncode}")
        runs.append(Run(**json.loads(out.decode().strip().splitlines()[-1])))
    return Run.merge(runs)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain_report(store_path: Path, run: Run) -> Dict[str, int]:
    store = SQLiteConversationStore(store_path)
    try:
        messages = [m for cid in run.conversation_ids for m in store.get_conversation(cid)]
    finally:
        store.close()
    by_id = {m.id: m for m in messages}
    cut = [by_id[i].status for i in run.disconnected_ids if i in by_id]
    return {"sent": run.sent, "user_stored": sum(m.role == "user" for m in messages),
            "pending": sum(m.status == "pending" for m in messages),
            "cancelled": sum(m.status == "cancelled" for m in messages), "disconnects": run.disconnects,
            "disconnected_cancelled": cut.count("cancelled"), "disconnected_complete": cut.count("complete"),
            "cross_reads_not_404": run.cross_reads_not_404, "5xx": run.errors_5xx}


def figures(http: Run, inproc: Run) -> Dict[str, float]:
    ms = {name: 1000 * pct(values, q) for name, values, q in (
        ("turn_p50", http.turn_s, .5), ("turn_p95", http.turn_s, .95), ("in_turn_p50", inproc.turn_s, .5),
        ("in_turn_p95", inproc.turn_s, .95), ("first_p50", http.first_s, .5), ("first_p95", http.first_s, .95),
        ("in_first_p50", inproc.first_s, .5), ("in_first_p95", inproc.first_s, .95),
        ("paired_p50", http.paired_s, .5), ("paired_p95", http.paired_s, .95), ("own_p50", http.own_s, .5),
        ("own_p95", http.own_s, .95))}
    ms["over_p50"], ms["over_p95"] = ms["turn_p50"] - ms["in_turn_p50"], ms["turn_p95"] - ms["in_turn_p95"]
    ms["tps"], ms["in_tps"] = http.turns_per_s, inproc.turns_per_s
    ms["cpu"], ms["in_cpu"] = 1000 * http.cpu_s / http.sent, 1000 * inproc.cpu_s / inproc.sent
    ms["client_cpu"] = 1000 * http.client_cpu_s / http.sent
    return ms


ROW = ("{n:>5} | {turn_p50:>7.1f} / {turn_p95:>7.1f} | {in_turn_p50:>6.1f} / {in_turn_p95:>6.1f} | "
       "{over_p50:>7.1f} / {over_p95:>7.1f} | {first_p50:>6.1f} / {first_p95:>6.1f} | {in_first_p50:>4.1f} / "
       "{in_first_p95:>4.1f} | {paired_p50:>6.1f} / {paired_p95:>6.1f} | {own_p50:>5.1f} / {own_p95:>5.1f} | "
       "{tps:>6.1f} | {in_tps:>6.1f} | {cpu:>5.1f} | {in_cpu:>5.1f} | {client_cpu:>5.1f}")
HEADER = (f"{'conv':>5} | {'turn p50/p95 ms http':>17} | {'in-process':>15} | {'overhead p50/p95 ms':>17} | "
          f"{'first event ms http':>15} | {'in-proc':>11} | {'paired overhead':>15} | {'server own':>13} | "
          f"{'turns/s':>6} | {'in-proc':>6} | "
          f"{'CPU ms/turn':>5} | {'in-proc':>5} | {'client':>5}")


def orchestrate(args: argparse.Namespace) -> int:
    from tests.serve.conftest import Server

    levels = [32] if args.quick else [int(x) for x in args.concurrency.split(",")]
    turns, repeat = (2, 1) if args.quick else (args.turns, args.repeat)
    token_delay = str(args.token_ms / 1000)
    work = Path(tempfile.mkdtemp(prefix="convrag-serve-load-"))
    (work / "http").mkdir()
    (work / "inproc").mkdir()
    keys_store = SQLiteConversationStore(work / "http" / "chats.db")
    keys = [keys_store.create_key(u)[1] for u in USERS]
    keys_store.close()
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {"CONVRAG_TEST_TOKEN_DELAY": token_delay, "CONVRAG_TEST_MAX_QUESTION": "2000", "PYTHONPATH": path}
    env["CONVRAG_TEST_STORE_CALLS"] = args.store_calls
    env["CONVRAG_TEST_RESUME_GRACE"] = repr(args.resume_grace_s)
    inproc = subprocess.Popen([sys.executable, __file__, "--role", "inproc"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, cwd=ROOT, text=True,
                              env={**os.environ, **env, "CONVRAG_TEST_DIR": str(work / "inproc")})
    server = Server(work / "http", env=env).wait(300)
    assert inproc.stdout is not None and inproc.stdin is not None
    while inproc.stdout.readline().strip() != "ready":
        if inproc.poll() is not None:
            raise RuntimeError("the in-process baseline exited")
    probe = httpx.post(server.url + "/v1/conversations", json={"title": "probe"},
                       headers={"Authorization": f"Bearer {keys[0]}"}).json()["id"]
    rows: List[Tuple[int, List[Dict[str, float]], List[Dict[str, int]]]] = []
    try:
        for n in levels:
            per_run, drains = [], []
            for _ in range(repeat):
                inproc.stdin.write(f"{n} {turns}\n")
                inproc.stdin.flush()
                baseline = Run(**json.loads(inproc.stdout.readline()))
                cpu = process_cpu_s(server.proc.pid)
                clients = args.clients if args.clients is not None else -(-n // CONVERSATIONS_PER_CLIENT)
                http = run_clients(server.url, n, turns, keys[1:], probe, clients)
                http.cpu_s = process_cpu_s(server.proc.pid) - cpu
                per_run.append(figures(http, baseline))
                drains.append(drain_report(work / "http" / "chats.db", http))
                print(ROW.format(n=n, **per_run[-1]), "  (one run)", file=sys.stderr, flush=True)
            rows.append((n, per_run, drains))
    finally:
        server.stop()
        inproc.stdin.close()
        inproc.wait(timeout=60)
    load = os.getloadavg()[0]
    fast = [m for m in ("uvloop", "httptools") if importlib.util.find_spec(m) is not None]
    clients_text = (f"{args.clients} process(es)" if args.clients is not None
                    else f"one process per {CONVERSATIONS_PER_CLIENT} conversations")
    print(f"convrag serve load: 1 uvicorn worker ({' + '.join(fast) if fast else 'asyncio + h11'}), SQLite store "
          f"(store calls: {args.store_calls}{' = on the loop' if args.store_calls == 'auto' else ''}), Milvus Lite, scripted LLM {args.token_ms:g} ms/token, "
          f"{turns} turns per conversation, 1 in {DISCONNECT_EVERY} conversations disconnects after 3 deltas of its "
          f"first turn (resume grace {args.resume_grace_s:g} s); load client in {clients_text}, in-process baseline in its own process; medians "
          f"of {repeat} run(s); os.cpu_count()={os.cpu_count()}, load average {load:.1f} at the end (a shared "
          "machine: figures vary run to run; compare the columns of one row)")
    print(HEADER)
    print("-" * len(HEADER))
    for n, per_run, _ in rows:
        print(ROW.format(n=n, **{k: statistics.median(r[k] for r in per_run) for k in per_run[0]}))
    print("\nafter the drain (HTTP runs; read from the store file):")
    for n, _, drains in rows:
        for d in drains:
            ok = (d["user_stored"] == d["sent"] and d["pending"] == 0
                  and d["cancelled"] == d["disconnected_cancelled"]
                  and d["disconnected_cancelled"] + d["disconnected_complete"] == d["disconnects"]
                  and d["cross_reads_not_404"] == 0 and d["5xx"] == 0)
            print(f"{n:>5} conversations: user messages stored {d['user_stored']} / sent {d['sent']}, pending "
                  f"{d['pending']}, cancelled {d['cancelled']}; of {d['disconnects']} disconnects "
                  f"{d['disconnected_cancelled']} cancelled, {d['disconnected_complete']} complete (the answer was "
                  f"sent before the disconnect reached the server); reads across users not 404: "
                  f"{d['cross_reads_not_404']}, 5xx: {d['5xx']} -> {'OK' if ok else 'MISMATCH'}")
    if args.json:
        print(json.dumps([{"conversations": n, "runs": per_run, "drain": drains} for n, per_run, drains in rows]))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="32 conversations x 2 turns, once")
    parser.add_argument("--concurrency", default="32,128,512")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="runs per concurrency level (medians are printed)")
    parser.add_argument("--clients", type=int, default=None,
                        help=f"load client processes (default: one per {CONVERSATIONS_PER_CLIENT} conversations)")
    parser.add_argument("--token-ms", type=float, default=5.0, help="the scripted LLM's delay per token")
    parser.add_argument("--store-calls", choices=("auto", "threads", "loop"), default="auto",
                        help="create_app's store_on_loop: auto (the default: on the loop for SQLite), threads, loop")
    parser.add_argument("--resume-grace-s", type=float, default=0.0,
                        help="the server's resume grace: how long an answer whose client went away goes on (default "
                             "0: a disconnect cancels it at once; with more, the disconnecting clients poll their "
                             "conversation until it settles, which the bench then counts)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--memory", action="store_true",
                        help="instead: the HTTP load against a server with memory off and one with it on, side by "
                             "side, then 0 memory reads across users or conversations checked (_serve_load_memory.py;"
                             " at least 4 turns per conversation)")
    parser.add_argument("--role", choices=("orchestrate", "client", "inproc"), default="orchestrate",
                        help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--keys", help=argparse.SUPPRESS)
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    parser.add_argument("--indices", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "inproc":
        serve_inprocess()
        return 0
    if args.role == "client":
        run = asyncio.run(http_load(args.url, [int(i) for i in args.indices.split(",") if i], args.turns,
                                    args.keys.split(","), args.probe, args.start_at))
        print(json.dumps(asdict(run)))
        return 0
    if args.memory:
        from _serve_load_memory import compare
        return compare(args)
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
