"""Load on ``convrag serve``: N concurrent conversations x T turns over HTTP (SSE), in two setups, one after the other.

**single** (``--setup single``): one uvicorn worker, SQLite store, Milvus Lite file, the local embedding model, built
by ``tests/serve/server_app.py`` (a ScriptedLLM whose stream waits ``--token-ms`` per token), beside the same engine
parts in-process (the baseline: its own process, ``astream_chat`` at the same concurrency, no HTTP; runs alternate
in-process / HTTP per concurrency level, ``--repeat`` times).
**workers** (``--setup workers``; ``bench/_serve_fleet.py``): two one-worker uvicorn processes over one PostgreSQL
server and one Milvus server process (milvus-lite serving gRPC on a TCP port); per concurrency level, ``--repeat``
calm runs (their figures go beside the single worker's), then ``--repeat`` runs in which ``--kills`` workers are
killed with ``kill -9`` and restarted at once on the same port under the same worker name (rows marked ``+k``).
``--setup both`` (the default) runs single, then workers.

The load clients (httpx, ``--clients`` processes, by default one per 32 conversations) reach the workers through
:class:`Balancer`, as a client behind a load balancer would: each request to the next worker; a worker that dropped
or refused a connection is skipped for a second. A turn whose stream was cut (its worker died: a connection error,
never a 5xx) is recovered on the other worker: the client reads its conversation, sends its question again if it was
not stored, waits while the answer is ``pending`` (the claim is freed by the restart, or when the lease lapses), and
regenerates an ``interrupted`` answer; the bench counts what the clients saw and did. 10% of the conversations
disconnect mid-stream on their first turn (after 3 deltas). Four users with API keys: three own the conversations;
after each turn a client reads a conversation of the fourth and the documents of the fourth's own knowledge base
(both must be 404).

Printed per concurrency (the median over the repeats): turn time p50 / p95 (single: beside in-process, and the
overhead, HTTP minus in-process), time to the first event (HTTP: the ``start`` event; in-process: the placeholder
stored), the paired overhead (per HTTP turn: the client's turn time minus the engine's time for that same turn inside
the server, from the ``done`` event's ``timings``), the server's own time (per turn: ``server_ms - engine_ms``: from
the request's arrival at the app to its final event, less the engine's time), turns per second, and CPU time per turn
(single: the server process, which also answers each conversation's creation and the probes, and the baseline's;
both: the load client's). After each run's drain, read from the store (after the lease, on runs with kills): user
messages stored = sent (none lost, none twice), none ``pending``, no claim held, every latest answer ``complete`` or
``cancelled``, ``cancelled`` = disconnects, probes not 404, 5xx. The bench exits 1 when any of these fails, and checks
the path it measured (workers: PostgreSQL and the Milvus server in use, nothing local in the workers' folders, both
workers answered, each planned kill done with exit -9). At the end: server own and first event p50 at the first
level, the two setups side by side, and ``uptime``.

    python bench/serve_load.py --quick                                 # 32 conversations x 2 turns, once, both setups
    python bench/serve_load.py --concurrency 32,128,512 --repeat 1     # the target run
    python bench/serve_load.py --setup single --concurrency 32 --turns 8 --repeat 3   # the single-worker figures
    python bench/serve_load.py --memory --concurrency 32,128           # memory off and on side by side
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

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


#: a client's wait before it sends again to a worker that dropped its connection, its tries per request, and how
#: long it keeps recovering a cut turn (a restart takes 30 s on a loaded machine, a turn at 512 conversations minutes)
DOWN_S = 1.0
RETRIES = 100
RECOVER_S = 600.0


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
    cross_kb_not_404: int = 0
    #: requests and streams that met a connection error (a killed worker), turns cut by one, and what the clients did
    connection_errors: int = 0
    cut_turns: int = 0
    resent: int = 0
    regenerated: int = 0
    unrecovered: int = 0
    #: turns whose stream ended without a done event, and streams with an error event
    unanswered: int = 0
    error_events: int = 0
    #: the X-Worker-Pid of every answer (which processes served the run)
    worker_pids: List[str] = field(default_factory=list)
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
            for name in COUNTS:
                setattr(out, name, getattr(out, name) + getattr(r, name))
            out.client_cpu_s += r.client_cpu_s
            out.worker_pids = sorted(set(out.worker_pids) | set(r.worker_pids))
        return out

    @property
    def turns_per_s(self) -> float:
        return self.sent / (self.ended - self.started)


#: the Run counters summed over the client processes
COUNTS = ("errors_5xx", "cross_reads_not_404", "cross_kb_not_404", "connection_errors", "cut_turns", "resent",
          "regenerated", "unrecovered", "unanswered", "error_events")


def pct(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# --- the load client (its own process: --role client) -------------------------------------------------------------
class Balancer:
    """What a load balancer in front of the workers does for a client: each request goes to the next worker in turn;
    a worker that refused or dropped a connection is skipped for :data:`DOWN_S` seconds. With one URL, one client."""

    def __init__(self, urls: List[str], limits: httpx.Limits) -> None:
        self.clients = [httpx.AsyncClient(base_url=u, timeout=300, limits=limits) for u in urls]
        self.down_until = [0.0] * len(urls)
        self.turn = 0

    def pick(self) -> int:
        for _ in range(len(self.clients)):
            i, self.turn = self.turn % len(self.clients), self.turn + 1
            if self.down_until[i] <= time.monotonic():
                return i
        return self.turn % len(self.clients)  # every worker down: try the next anyway

    def down(self, i: int, run: "Run") -> None:
        run.connection_errors += 1
        self.down_until[i] = time.monotonic() + DOWN_S

    async def request(self, method: str, path: str, run: "Run", **kwargs: Any) -> httpx.Response:
        """One request, sent again to the next worker after a connection error (a new conversation may then be
        made twice: the first one stays empty, as it would behind a real balancer)."""
        for _ in range(RETRIES):
            i = self.pick()
            try:
                r = await self.clients[i].request(method, path, **kwargs)
            except httpx.TransportError:
                self.down(i, run)
                await asyncio.sleep(0.2)
                continue
            if r.status_code >= 500:
                run.errors_5xx += 1
            seen(r, run)
            return r
        raise RuntimeError(f"{method} {path}: no worker answered in {RETRIES} tries")

    async def aclose(self) -> None:
        for c in self.clients:
            await c.aclose()


def seen(response: httpx.Response, run: "Run") -> None:
    pid = response.headers.get("x-worker-pid")
    if pid is not None and pid not in run.worker_pids:
        run.worker_pids.append(pid)


@dataclass
class Streamed:
    """One streamed turn as the client saw it."""

    status: int = 0
    first_s: Optional[float] = None
    deltas: int = 0
    done: bool = False
    error_event: bool = False
    cut: bool = False  # the connection dropped (its worker died) before the last event
    total_s: float = 0.0  # from the request to the done event
    assistant_id: Optional[str] = None
    timings: Dict[str, float] = field(default_factory=dict)


async def stream_turn(bal: Balancer, path: str, body: Dict[str, Any], headers: Dict[str, str], run: "Run",
                      stop_after_deltas: int = 0) -> Streamed:
    """POST ``path`` as a stream to the next worker and read it to its last event (or ``stop_after_deltas`` deltas:
    a client going away); a connection error marks the worker down and the turn ``cut``."""
    out, start, event = Streamed(), time.perf_counter(), ""
    i = bal.pick()
    try:
        async with bal.clients[i].stream("POST", path, headers=headers, json=body) as resp:
            out.status = resp.status_code
            seen(resp, run)
            if resp.status_code >= 500:
                run.errors_5xx += 1
            if resp.status_code != 200:
                await resp.aread()
                return out
            async for line in resp.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                    if out.first_s is None:
                        out.first_s = time.perf_counter() - start
                elif line.startswith("data: "):
                    if out.assistant_id is None and "assistant_message_id" in line:
                        out.assistant_id = json.loads(line[6:])["assistant_message_id"]
                    if event == "done":
                        out.done, out.timings = True, json.loads(line[6:])["timings"]
                        out.total_s = time.perf_counter() - start
                    elif event == "error":
                        out.error_event = True
                    elif event == "delta":
                        out.deltas += 1
                        if out.deltas == stop_after_deltas:
                            return out
    except httpx.TransportError:
        bal.down(i, run)
        out.cut = True
    return out


async def recover(bal: Balancer, cid: str, headers: Dict[str, str], question: str, users: int, run: "Run") -> None:
    """After a cut turn, what a client does on the other worker: read the conversation; its question not stored
    (``users`` user messages expected) -> send it again; its answer ``pending`` -> wait (the dead worker's claim
    is freed when it restarts or its lease lapses); ``interrupted``/``error`` -> regenerate; ``complete`` -> done.
    A 409 (the conversation still claimed) -> wait and try again."""
    deadline = time.monotonic() + RECOVER_S
    while time.monotonic() < deadline:
        messages = (await bal.request("GET", f"/v1/conversations/{cid}", run, headers=headers)).json()["messages"]
        asked = [m for m in messages if m["role"] == "user"]
        last = messages[-1] if messages else None
        if len(asked) < users:
            again = await stream_turn(bal, f"/v1/conversations/{cid}/messages", {"content": question}, headers, run)
            run.resent += 1
            if again.done:
                return
        elif last is not None and last["role"] == "assistant" and last["status"] == "complete":
            return
        elif last is not None and last["role"] == "assistant" and last["status"] != "pending":
            again = await stream_turn(bal, f"/v1/messages/{last['id']}/regenerate", {}, headers, run)
            run.regenerated += 1
            if again.done:
                return
        await asyncio.sleep(0.3)
    run.unrecovered += 1


async def http_conversation(bal: Balancer, index: int, turns: int, key: str, probes: Tuple[str, str],
                            run: Run) -> None:
    """``turns`` turns of one conversation; the first turn of one in :data:`DISCONNECT_EVERY` goes away after 3
    deltas; after each turn a read of another user's conversation and of a knowledge base the user is not a member
    of (both must answer 404)."""
    headers = {"Authorization": f"Bearer {key}"}
    r = await bal.request("POST", "/v1/conversations", run, json={"title": f"load {index}"}, headers=headers)
    r.raise_for_status()
    cid = r.json()["id"]
    run.conversation_ids.append(cid)
    for t in range(turns):
        disconnect = t == 0 and index % DISCONNECT_EVERY == 0
        question = QUESTIONS[t % len(QUESTIONS)]
        run.sent += 1
        turn = await stream_turn(bal, f"/v1/conversations/{cid}/messages", {"content": question}, headers, run,
                                 stop_after_deltas=3 if disconnect else 0)
        if turn.cut:
            run.cut_turns += 1
            await recover(bal, cid, headers, question, t + 1, run)
        elif disconnect:
            run.disconnects += 1
            if turn.assistant_id is not None:
                run.disconnected_ids.append(turn.assistant_id)
            await wait_settled(bal, cid, headers, run)
        elif turn.done:
            run.turn_s.append(turn.total_s)
            run.paired_s.append(run.turn_s[-1] - turn.timings["engine_ms"] / 1000)
            run.own_s.append((turn.timings["server_ms"] - turn.timings["engine_ms"]) / 1000)
        else:
            run.unanswered += 1
        run.error_events += turn.error_event
        if turn.first_s is not None and not turn.cut:
            run.first_s.append(turn.first_s)
        user_probe, kb_probe = probes
        peek = await bal.request("GET", f"/v1/conversations/{user_probe}", run, headers=headers)
        run.cross_reads_not_404 += peek.status_code != 404
        if kb_probe:  # "" with --probes conversation
            peek = await bal.request("GET", f"/v1/knowledge-bases/{kb_probe}/documents", run, headers=headers)
            run.cross_kb_not_404 += peek.status_code != 404


async def wait_settled(bal: Balancer, cid: str, headers: Dict[str, str], run: "Run") -> None:
    """Until the cancelled turn released its conversation (its message is no longer pending)."""
    for _ in range(int(RECOVER_S / 0.02)):
        body = (await bal.request("GET", f"/v1/conversations/{cid}", run, headers=headers)).json()
        if all(m["status"] != "pending" for m in body.get("messages", [])):
            return
        await asyncio.sleep(0.02)


async def http_load(urls: List[str], indices: List[int], turns: int, keys: List[str], probes: Tuple[str, str],
                    start_at: float) -> Run:
    run = Run()
    limits = httpx.Limits(max_connections=len(indices) + 8, max_keepalive_connections=len(indices) + 8)
    bal = Balancer(urls, limits)
    try:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        run.started, cpu = time.time(), time.process_time()
        await asyncio.gather(*[http_conversation(bal, i, turns, keys[i % len(keys)], probes, run) for i in indices])
        run.ended, run.client_cpu_s = time.time(), time.process_time() - cpu
    finally:
        await bal.aclose()
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
def run_clients(urls: List[str], n: int, turns: int, keys: List[str], probes: Tuple[str, str],
                processes: int) -> Run:
    start_at = time.time() + 3.0  # every client process imported and connected before the first request
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--role", "client", "--url", ",".join(urls), "--turns", str(turns),
         "--probe", ",".join(probes), "--keys", ",".join(keys),
         "--indices", ",".join(str(i) for i in range(p, n, processes)), "--start-at", repr(start_at)],
        stdout=subprocess.PIPE, cwd=ROOT,
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


def open_store(spec: str) -> Any:
    """The conversation store at ``spec``: a PostgreSQL URL or a SQLite file."""
    if spec.startswith("postgresql"):
        from llama_index_convrag.storage.conversation.postgres import PostgresConversationStore

        return PostgresConversationStore(spec)
    return SQLiteConversationStore(spec)


def claims_held(spec: str, conversation_ids: List[str]) -> int:
    """Conversations of ``conversation_ids`` that a turn's claim holds now (``busy_until`` in the future: a claim
    whose time passed holds nothing, the next turn takes it)."""
    import sqlalchemy as sa

    engine = sa.create_engine(spec if spec.startswith("postgresql") else f"sqlite:///{spec}")
    try:
        with engine.connect() as conn:
            held = {r[0] for r in conn.execute(sa.text(
                "SELECT id FROM convrag_conversations WHERE busy_until >= :n"), {"n": time.time()})}
    finally:
        engine.dispose()
    return len(held & set(conversation_ids))


def drain_report(spec: str, run: Run) -> Dict[str, int]:
    """What the store holds after the run: user messages (each sent once: none lost, none twice), answers still
    ``pending``, latest answers neither ``complete`` nor ``cancelled``, claims still held; beside the clients'
    counts."""
    with open_store(spec) as store:
        messages = [m for cid in run.conversation_ids for m in store.get_conversation(cid)]
    by_id = {m.id: m for m in messages}
    cut = [by_id[i].status for i in run.disconnected_ids if i in by_id]
    latest = [m for m in messages if m.role == "assistant" and m.superseded_by is None]
    return {"sent": run.sent, "user_stored": sum(m.role == "user" for m in messages),
            "pending": sum(m.status == "pending" for m in messages),
            "claimed": claims_held(spec, run.conversation_ids),
            "unfinished": sum(m.status not in ("complete", "cancelled") for m in latest),
            "interrupted_kept": sum(m.status == "interrupted" for m in messages),
            "cancelled": sum(m.status == "cancelled" for m in latest), "disconnects": run.disconnects,
            "disconnected_cancelled": cut.count("cancelled"), "disconnected_complete": cut.count("complete"),
            "cross_reads_not_404": run.cross_reads_not_404, "cross_kb_not_404": run.cross_kb_not_404,
            "5xx": run.errors_5xx, "connection_errors": run.connection_errors, "cut_turns": run.cut_turns,
            "resent": run.resent, "regenerated": run.regenerated, "unrecovered": run.unrecovered,
            "unanswered": run.unanswered, "error_events": run.error_events}


def drain_ok(d: Dict[str, int]) -> bool:
    return (d["user_stored"] == d["sent"] and d["pending"] == 0 and d["claimed"] == 0 and d["unfinished"] == 0
            and d["cancelled"] == d["disconnected_cancelled"]
            and d["disconnected_cancelled"] + d["disconnected_complete"] == d["disconnects"]
            and d["cross_reads_not_404"] == 0 and d["cross_kb_not_404"] == 0 and d["5xx"] == 0
            and d["unrecovered"] == 0 and d["unanswered"] == 0 and d["error_events"] == 0)


def figures(http: Run, inproc: Optional[Run]) -> Dict[str, float]:
    """The printed figures of one run (ms); the in-process columns only where a baseline ran."""
    pairs: List[Tuple[str, List[float], float]] = [
        ("turn_p50", http.turn_s, .5), ("turn_p95", http.turn_s, .95), ("first_p50", http.first_s, .5),
        ("first_p95", http.first_s, .95), ("paired_p50", http.paired_s, .5), ("paired_p95", http.paired_s, .95),
        ("own_p50", http.own_s, .5), ("own_p95", http.own_s, .95)]
    if inproc is not None:
        pairs += [("in_turn_p50", inproc.turn_s, .5), ("in_turn_p95", inproc.turn_s, .95),
                  ("in_first_p50", inproc.first_s, .5), ("in_first_p95", inproc.first_s, .95)]
    ms = {name: 1000 * pct(values, q) for name, values, q in pairs}
    ms["tps"], ms["client_cpu"] = http.turns_per_s, 1000 * http.client_cpu_s / http.sent
    if inproc is not None:
        ms["over_p50"], ms["over_p95"] = ms["turn_p50"] - ms["in_turn_p50"], ms["turn_p95"] - ms["in_turn_p95"]
        ms["in_tps"] = inproc.turns_per_s
        ms["cpu"], ms["in_cpu"] = 1000 * http.cpu_s / http.sent, 1000 * inproc.cpu_s / inproc.sent
    return ms


ROW = ("{n:>5} | {turn_p50:>7.1f} / {turn_p95:>7.1f} | {in_turn_p50:>6.1f} / {in_turn_p95:>6.1f} | "
       "{over_p50:>7.1f} / {over_p95:>7.1f} | {first_p50:>6.1f} / {first_p95:>6.1f} | {in_first_p50:>4.1f} / "
       "{in_first_p95:>4.1f} | {paired_p50:>6.1f} / {paired_p95:>6.1f} | {own_p50:>5.1f} / {own_p95:>5.1f} | "
       "{tps:>6.1f} | {in_tps:>6.1f} | {cpu:>5.1f} | {in_cpu:>5.1f} | {client_cpu:>5.1f}")
HEADER = (f"{'conv':>5} | {'turn p50/p95 ms http':>17} | {'in-process':>15} | {'overhead p50/p95 ms':>17} | "
          f"{'first event ms http':>15} | {'in-proc':>11} | {'paired overhead':>15} | {'server own':>13} | "
          f"{'turns/s':>6} | {'in-proc':>6} | "
          f"{'CPU ms/turn':>5} | {'in-proc':>5} | {'client':>5}")
#: the two-worker rows: no in-process baseline (its engine parts would share no store with the workers), no server
#: CPU (a killed worker's CPU time goes with it)
WORKERS_ROW = ("{n:>5} | {turn_p50:>7.1f} / {turn_p95:>7.1f} | {first_p50:>6.1f} / {first_p95:>6.1f} | "
               "{paired_p50:>6.1f} / {paired_p95:>6.1f} | {own_p50:>5.1f} / {own_p95:>5.1f} | {tps:>6.1f} | "
               "{client_cpu:>5.1f}")
WORKERS_HEADER = (f"{'conv':>5} | {'turn p50/p95 ms':>17} | {'first event ms':>15} | {'paired overhead':>15} | "
                  f"{'server own':>13} | {'turns/s':>6} | {'client CPU ms/turn':>5}")


@dataclass
class SetupResult:
    """One setup's rows: per concurrency, the figures and the drain of each run; ``checks``: what the bench
    verified about the path it measured."""

    title: str
    #: (label, figures per run, drain per run); the label is the concurrency, "+k" on the workers' runs with kills
    rows: List[Tuple[Any, List[Dict[str, float]], List[Dict[str, Any]]]] = field(default_factory=list)
    checks: List[str] = field(default_factory=list)


def server_env(args: argparse.Namespace) -> Dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {"CONVRAG_TEST_TOKEN_DELAY": str(args.token_ms / 1000), "CONVRAG_TEST_MAX_QUESTION": "2000",
            "PYTHONPATH": path, "CONVRAG_TEST_STORE_CALLS": args.store_calls,
            "CONVRAG_TEST_RESUME_GRACE": repr(args.resume_grace_s)}


def accounts(store: Any) -> Tuple[List[str], str]:
    """Four users' keys and a knowledge base of ``u0`` alone (the cross-knowledge-base probe)."""
    keys = [store.create_key(u)[1] for u in USERS]
    store.ensure_user(USERS[0])
    return keys, store.create_knowledge_base("private-u0", USERS[0]).id


def client_processes(args: argparse.Namespace, n: int) -> int:
    return args.clients if args.clients is not None else -(-n // CONVERSATIONS_PER_CLIENT)


def run_single(args: argparse.Namespace, levels: List[int], turns: int, repeat: int) -> SetupResult:
    """One uvicorn worker, SQLite, Milvus Lite, beside the in-process baseline."""
    from tests.serve.conftest import Server

    work = Path(tempfile.mkdtemp(prefix="convrag-serve-load-"))
    (work / "http").mkdir()
    (work / "inproc").mkdir()
    with SQLiteConversationStore(work / "http" / "chats.db") as store:
        keys, private_kb = accounts(store)
    env = server_env(args)
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
    result = SetupResult("1 uvicorn worker, SQLite store, Milvus Lite file")
    try:
        for n in levels:
            per_run, drains = [], []
            for _ in range(repeat):
                inproc.stdin.write(f"{n} {turns}\n")
                inproc.stdin.flush()
                baseline = Run(**json.loads(inproc.stdout.readline()))
                cpu = process_cpu_s(server.proc.pid)
                http = run_clients([server.url], n, turns, keys[1:], (probe, kb_probe(args, private_kb)),
                                   client_processes(args, n))
                http.cpu_s = process_cpu_s(server.proc.pid) - cpu
                per_run.append(figures(http, baseline))
                drains.append(drain_report(str(work / "http" / "chats.db"), http))
                print(ROW.format(n=n, **per_run[-1]), "  (one run)", file=sys.stderr, flush=True)
            result.rows.append((n, per_run, drains))
    finally:
        server.stop()
        inproc.stdin.close()
        inproc.wait(timeout=60)
    return result


def run_workers(args: argparse.Namespace, levels: List[int], turns: int, repeat: int) -> SetupResult:
    """Two uvicorn workers over PostgreSQL and a Milvus server process; ``--kills`` workers killed per run."""
    from _serve_fleet import LEASE_S, Fleet, Killer

    work = Path(tempfile.mkdtemp(prefix="convrag-serve-fleet-"))
    fleet = Fleet(work, server_env(args))
    result = SetupResult(f"2 uvicorn workers, PostgreSQL store, Milvus server process, lease {LEASE_S:g} s, "
                         f"{args.kills} worker(s) killed (kill -9) and restarted per run")
    try:
        fleet.start()
        with open_store(fleet.store_url) as store:
            keys, private_kb = accounts(store)
        probe = httpx.post(fleet.urls[0] + "/v1/conversations", json={"title": "probe"},
                           headers={"Authorization": f"Bearer {keys[0]}"}).json()["id"]
        killed: List[Dict[str, Any]] = []
        for n in levels:
            for planned in (0, args.kills):  # calm runs (the figures beside the single worker's), then with kills
                per_run, drains = [], []
                for _ in range(repeat):
                    total = n * turns
                    killer = Killer(fleet, time.time(), [total * (k + 1) // (planned + 2) for k in range(planned)],
                                    first="ab"[len(killed) % 2])
                    killer.start()
                    http = run_clients(fleet.urls, n, turns, keys[1:], (probe, kb_probe(args, private_kb)),
                                       client_processes(args, n))
                    kills = killer.finish().kills
                    killed += kills
                    time.sleep(LEASE_S + 1)  # "after the lease": a claim a dead worker held must be gone by now
                    per_run.append(figures(http, None))
                    drains.append({**drain_report(fleet.store_url, http), "kills": len(kills),
                                   "workers_seen": len(set(http.worker_pids))})
                    print(WORKERS_ROW.format(n=f"{n}{'+k' if planned else ''}", **per_run[-1]),
                          f"  (one run; kills {kills})", file=sys.stderr, flush=True)
                    if len(kills) != planned or any(k["returncode"] != -signal.SIGKILL for k in kills):
                        raise AssertionError(f"{planned} kill -9 per run planned, done: {kills}")
                    if len(set(http.worker_pids)) < 2:
                        raise AssertionError(f"one worker answered the whole run: pids {http.worker_pids}")
                result.rows.append((f"{n}{'+k' if planned else ''}", per_run, drains))
        for name in ("a", "b"):  # the path measured: nothing of the single-worker setup's kind in the workers
            for local in ("chats.db", "milvus.db"):
                if (work / name / local).exists():
                    raise AssertionError(f"worker {name} made {local}: it did not use PostgreSQL / the Milvus server")
        if fleet.milvus._proc.poll() is not None:
            raise AssertionError("the Milvus server process is gone")
        result.checks.append(f"store {fleet.store_url.split('@')[0]}@... (PostgreSQL; no chats.db in the workers' "
                             f"folders), Milvus {fleet.milvus_uri} (a server process; no milvus.db in the workers' "
                             f"folders), kill -9 of pids {[k['pid'] for k in killed]} (exit {-signal.SIGKILL}), "
                             f"restarts took {', '.join(str(round(k['restart_s'])) for k in killed)} s")
    finally:
        fleet.stop()
    return result


def print_result(result: SetupResult, row: str, header: str, probed: bool = True) -> bool:
    print(f"\n{result.title}")
    for check in result.checks:
        print(f"checked: {check}")
    print(header)
    print("-" * len(header))
    for n, per_run, _ in result.rows:
        print(row.format(n=n, **{k: statistics.median(r[k] for r in per_run) for k in per_run[0]}))
    print("after the drain (read from the store):")
    ok = True
    for n, _, drains in result.rows:
        for d in drains:
            ok &= drain_ok(d)
            kills = (f"; kills {d['kills']}, worker processes seen {d['workers_seen']}: turns cut {d['cut_turns']} of "
                     f"{d['sent']} ({100 * d['cut_turns'] / d['sent']:.1f}%), connection errors seen "
                     f"{d['connection_errors']}, clients resent {d['resent']} and regenerated {d['regenerated']}, "
                     f"unrecovered {d['unrecovered']}, interrupted versions kept {d['interrupted_kept']}"
                     if "kills" in d else "")
            print(f"{n:>5} conversations: user messages stored {d['user_stored']} / sent {d['sent']}, pending "
                  f"{d['pending']}, claimed after the lease {d['claimed']}, unfinished answers {d['unfinished']}, "
                  f"cancelled {d['cancelled']}; of {d['disconnects']} disconnects {d['disconnected_cancelled']} "
                  f"cancelled, {d['disconnected_complete']} complete (the answer was sent before the disconnect "
                  f"reached the server); reads across users not 404: {d['cross_reads_not_404']}, across knowledge "
                  f"bases not 404: {d['cross_kb_not_404'] if probed else 'not probed'}, 5xx: {d['5xx']}, error events {d['error_events']}, turns "
                  f"without a done event {d['unanswered']}"
                  f"{kills} -> {'OK' if drain_ok(d) else 'MISMATCH'}")
    return ok


def kb_probe(args: argparse.Namespace, private_kb: str) -> str:
    """The knowledge base the clients probe after each turn; "" (no probe) with ``--probes conversation``."""
    return private_kb if args.probes == "both" else ""


def orchestrate(args: argparse.Namespace) -> int:
    levels = [32] if args.quick else [int(x) for x in args.concurrency.split(",")]
    turns, repeat = (2, 1) if args.quick else (args.turns, args.repeat)
    setups = ("single", "workers") if args.setup == "both" else (args.setup,)
    results: Dict[str, SetupResult] = {}
    for setup in setups:
        results[setup] = (run_single if setup == "single" else run_workers)(args, levels, turns, repeat)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    fast = [m for m in ("uvloop", "httptools") if importlib.util.find_spec(m) is not None]
    clients_text = (f"{args.clients} process(es)" if args.clients is not None
                    else f"one process per {CONVERSATIONS_PER_CLIENT} conversations")
    print(f"convrag serve load: uvicorn ({' + '.join(fast) if fast else 'asyncio + h11'}), store calls "
          f"{args.store_calls}{' (on the loop for SQLite)' if args.store_calls == 'auto' else ''}, scripted LLM "
          f"{args.token_ms:g} ms/token, {turns} turns per conversation, 1 in {DISCONNECT_EVERY} conversations "
          f"disconnects after 3 deltas of its first turn (resume grace {args.resume_grace_s:g} s); probes after each "
          f"turn: {'a conversation and a knowledge base' if args.probes == 'both' else 'a conversation'}; load client in "
          f"{clients_text}; medians of {repeat} run(s); os.cpu_count()={os.cpu_count()}; uptime at the end: {uptime} "
          "(a shared machine: figures vary run to run; compare the columns of one row)")
    ok = True
    if "single" in results:
        ok &= print_result(results["single"], ROW, HEADER, args.probes == "both")
    if "workers" in results:
        ok &= print_result(results["workers"], WORKERS_ROW, WORKERS_HEADER, args.probes == "both")
    if len(results) == 2:
        print(f"\nat {levels[0]} conversations, p50 (targets on a quiet machine: server own <= 2.3 ms, first event "
              "<= 7.3 ms):")
        for setup, result in results.items():
            m = {k: statistics.median(r[k] for r in result.rows[0][1]) for k in ("own_p50", "first_p50")}
            print(f"  {setup:>8}: server own {m['own_p50']:.1f} ms, first event {m['first_p50']:.1f} ms "
                  f"({result.title})")
    if args.json:
        print(json.dumps({setup: [{"conversations": n, "runs": per_run, "drain": drains}
                                  for n, per_run, drains in result.rows] for setup, result in results.items()}))
    print("\nall checks:", "OK" if ok else "MISMATCH")
    return 0 if ok else 1


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
    parser.add_argument("--setup", choices=("single", "workers", "both"), default="both",
                        help="single: 1 uvicorn worker, SQLite, Milvus Lite, beside the in-process baseline; workers: "
                             "2 uvicorn workers over PostgreSQL and a Milvus server process, with kills; both (the "
                             "default): one after the other, printed side by side")
    parser.add_argument("--kills", type=int, default=1,
                        help="workers setup: kill -9 + restart per run, at even steps of the answers completed")
    parser.add_argument("--probes", choices=("both", "conversation"), default="both",
                        help="what the clients read after each turn: both (the default) another user's conversation "
                             "and a knowledge base they are not a member of; conversation: the first alone (the "
                             "requests of the first table's bench, for its figures side by side)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--memory-writers", type=int, default=None,
                        help="with --memory: the memory server's writer threads (default MemoryOptions.writers)")
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
        user_probe, kb_probe = args.probe.split(",")
        run = asyncio.run(http_load(args.url.split(","), [int(i) for i in args.indices.split(",") if i], args.turns,
                                    args.keys.split(","), (user_probe, kb_probe), args.start_at))
        print(json.dumps(asdict(run)))
        return 0
    if args.memory:
        from _serve_load_memory import compare
        return compare(args)
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
