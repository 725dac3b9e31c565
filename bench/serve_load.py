"""Load on ``convrag serve``: N concurrent conversations x T turns over HTTP (SSE), beside the same engine in-process.

The server is a real uvicorn process (one worker, SQLite store, Milvus Lite, the local embedding model) built by
``tests/serve/server_app.py``: a ScriptedLLM whose stream waits ``--token-ms`` per token. 10% of the conversations
disconnect mid-stream on their first turn (after 3 deltas). Four users with API keys own the conversations; after
each turn a client reads one conversation of another user (must be 404).

Printed per concurrency, HTTP beside in-process (the engine's ``astream_chat`` on the same parts, same concurrency):
turn time p50 / p95, server overhead per turn (HTTP p50 / p95 minus in-process p50 / p95), time to the first event
(HTTP: the ``start`` event; in-process: the placeholder stored), turns per second; then after the drain, read from
the store file: user messages stored = sent, messages left ``pending``, ``cancelled`` = disconnects, reads across
users that did not answer 404, 5xx answers.

    python bench/serve_load.py --quick          # 32 conversations x 2 turns
    python bench/serve_load.py                  # 32 / 128 / 512 conversations x 4 turns
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Tuple

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llama_index_convrag.serve.turn_store import TurnStore  # noqa: E402
from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from tests.serve.conftest import Server  # noqa: E402

USERS = ("u0", "u1", "u2", "u3")
QUESTIONS = ("What is BM25?", "And how does fusion merge lists?", "Where is Milvus Lite stored?",
             "Which one scales out?")
DISCONNECT_EVERY = 10


@dataclass
class Run:
    turn_s: List[float] = field(default_factory=list)
    first_s: List[float] = field(default_factory=list)
    sent: int = 0
    disconnects: int = 0
    disconnected_ids: List[str] = field(default_factory=list)
    errors_5xx: int = 0
    cross_reads_not_404: int = 0
    wall_s: float = 0.0


def pct(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def http_conversation(client: httpx.AsyncClient, index: int, turns: int, key: str, other: Tuple[str, str],
                            run: Run) -> str:
    headers = {"Authorization": f"Bearer {key}"}
    r = await client.post("/v1/conversations", json={"title": f"load {index}"}, headers=headers)
    r.raise_for_status()
    cid = r.json()["id"]
    for t in range(turns):
        disconnect = t == 0 and index % DISCONNECT_EVERY == 0
        start = time.perf_counter()
        first = None
        deltas = 0
        run.sent += 1
        async with client.stream("POST", f"/v1/conversations/{cid}/messages", headers=headers,
                                 json={"content": QUESTIONS[t % len(QUESTIONS)]}) as resp:
            if resp.status_code >= 500:
                run.errors_5xx += 1
                continue
            async for line in resp.aiter_lines():
                if line.startswith("event: ") and first is None:
                    first = time.perf_counter() - start
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
        if first is not None:
            run.first_s.append(first)
        peek = await client.get(f"/v1/conversations/{other[1]}", headers={"Authorization": f"Bearer {other[0]}"}) \
            if other[1] else None
        if peek is not None and peek.status_code != 404:
            run.cross_reads_not_404 += 1
    return cid


async def wait_settled(client: httpx.AsyncClient, cid: str, headers: Dict[str, str]) -> None:
    """Until the cancelled turn released its conversation (its message is no longer pending)."""
    for _ in range(500):
        body = (await client.get(f"/v1/conversations/{cid}", headers=headers)).json()
        if all(m["status"] != "pending" for m in body.get("messages", [])):
            return
        await asyncio.sleep(0.02)


async def http_load(url: str, n: int, turns: int, keys: List[str]) -> Tuple[Run, List[str]]:
    run = Run()
    limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=n + 8)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        # one conversation of user u0 that every other user tries to read
        probe = (await client.post("/v1/conversations", json={"title": "probe"},
                                   headers={"Authorization": f"Bearer {keys[0]}"})).json()["id"]
        start = time.perf_counter()
        cids = await asyncio.gather(*[
            http_conversation(client, i, turns, keys[1 + i % (len(keys) - 1)], (keys[1 + i % (len(keys) - 1)], probe),
                              run) for i in range(n)])
        run.wall_s = time.perf_counter() - start
    return run, list(cids)


async def inprocess_load(state: Any, n: int, turns: int) -> Run:
    """The same engine parts and store kind, called directly with the same concurrency (no disconnects)."""
    run = Run()

    async def conversation(i: int) -> None:
        cid = state.store.create_conversation("bench").id
        for t in range(turns):
            began: Dict[str, float] = {}
            start = time.perf_counter()
            store = TurnStore(state.store, lambda u, p: began.setdefault("at", time.perf_counter()))
            response = await state.engine_for(cid, store).astream_chat(QUESTIONS[t % len(QUESTIONS)])
            async for _ in response.async_response_gen():
                pass
            run.sent += 1
            run.turn_s.append(time.perf_counter() - start)
            run.first_s.append(began["at"] - start)

    start = time.perf_counter()
    await asyncio.gather(*[conversation(i) for i in range(n)])
    run.wall_s = time.perf_counter() - start
    return run


def drain_report(store_path: Path, cids: List[str], run: Run) -> Dict[str, int]:
    store = SQLiteConversationStore(store_path)
    try:
        messages = [m for cid in cids for m in store.get_conversation(cid)]
    finally:
        store.close()
    by_id = {m.id: m for m in messages}
    cut = [by_id[i].status for i in run.disconnected_ids if i in by_id]
    return {"sent": run.sent, "user_stored": sum(m.role == "user" for m in messages),
            "pending": sum(m.status == "pending" for m in messages),
            "cancelled": sum(m.status == "cancelled" for m in messages), "disconnects": run.disconnects,
            "disconnected_cancelled": cut.count("cancelled"), "disconnected_complete": cut.count("complete"),
            "cross_reads_not_404": run.cross_reads_not_404, "5xx": run.errors_5xx}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="32 conversations x 2 turns")
    parser.add_argument("--concurrency", default="32,128,512")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--token-ms", type=float, default=5.0, help="the scripted LLM's delay per token")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    levels = [32] if args.quick else [int(x) for x in args.concurrency.split(",")]
    turns = 2 if args.quick else args.turns
    os.environ["CONVRAG_TEST_TOKEN_DELAY"] = str(args.token_ms / 1000)
    os.environ["CONVRAG_TEST_MAX_QUESTION"] = "2000"
    work = Path(tempfile.mkdtemp(prefix="convrag-serve-load-"))
    (work / "http").mkdir()
    (work / "inproc").mkdir()
    keys_store = SQLiteConversationStore(work / "http" / "chats.db")
    keys = [keys_store.create_key(u)[1] for u in USERS]
    keys_store.close()
    os.environ["CONVRAG_TEST_DIR"] = str(work / "inproc")
    from tests.serve.server_app import create

    state = create().state.serve
    # the same paced LLM as in-process: the fixture's own default (20 ms per token) must not apply here
    server = Server(work / "http", env={"CONVRAG_TEST_TOKEN_DELAY": os.environ["CONVRAG_TEST_TOKEN_DELAY"]}).wait(300)
    rows = []
    try:
        for n in levels:
            inproc = asyncio.run(inprocess_load(state, n, turns))
            http, cids = asyncio.run(http_load(server.url, n, turns, keys))
            rows.append((n, http, inproc, drain_report(work / "http" / "chats.db", cids, http)))
    finally:
        server.stop()
    print(f"convrag serve load: 1 uvicorn worker, SQLite store, Milvus Lite, scripted LLM {args.token_ms:g} ms/token, "
          f"{turns} turns per conversation, 1 in {DISCONNECT_EVERY} conversations disconnects after 3 deltas of its first turn; "
          f"os.cpu_count()={os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (a shared machine: figures "
          "vary run to run; compare the columns of one row)")
    header = (f"{'conv':>5} | {'turn p50/p95 ms http':>21} | {'in-process':>13} | {'overhead p50/p95 ms':>19} | "
              f"{'first event p50/p95 ms http':>27} | {'in-proc':>13} | {'turns/s http':>12} | {'in-proc':>7}")
    print(header)
    print("-" * len(header))
    for n, http, inproc, drained in rows:
        over = (1000 * (pct(http.turn_s, .5) - pct(inproc.turn_s, .5)),
                1000 * (pct(http.turn_s, .95) - pct(inproc.turn_s, .95)))
        print(f"{n:>5} | {1000 * pct(http.turn_s, .5):>9.1f} / {1000 * pct(http.turn_s, .95):>9.1f} | "
              f"{1000 * pct(inproc.turn_s, .5):>5.0f} / {1000 * pct(inproc.turn_s, .95):>5.0f} | "
              f"{over[0]:>8.1f} / {over[1]:>8.1f} | "
              f"{1000 * pct(http.first_s, .5):>12.1f} / {1000 * pct(http.first_s, .95):>12.1f} | "
              f"{1000 * pct(inproc.first_s, .5):>5.1f} / {1000 * pct(inproc.first_s, .95):>5.1f} | "
              f"{http.sent / http.wall_s:>12.1f} | {inproc.sent / inproc.wall_s:>7.1f}")
    print("\nafter the drain (HTTP runs; read from the store file):")
    for n, _, _, d in rows:
        ok = (d["user_stored"] == d["sent"] and d["pending"] == 0 and d["cancelled"] == d["disconnected_cancelled"]
              and d["disconnected_cancelled"] + d["disconnected_complete"] == d["disconnects"]
              and d["cross_reads_not_404"] == 0 and d["5xx"] == 0)
        print(f"{n:>5} conversations: user messages stored {d['user_stored']} / sent {d['sent']}, pending "
              f"{d['pending']}, cancelled {d['cancelled']}; of {d['disconnects']} disconnects "
              f"{d['disconnected_cancelled']} cancelled, {d['disconnected_complete']} complete (the answer was sent "
              f"before the disconnect reached the server); reads across users not 404: "
              f"{d['cross_reads_not_404']}, 5xx: {d['5xx']} -> {'OK' if ok else 'MISMATCH'}")
    if args.json:
        print(json.dumps([{"conversations": n, "drain": d} for n, _, _, d in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
