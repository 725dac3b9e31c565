"""``serve_load.py --memory``: the same HTTP load against two servers side by side, memory off and memory on.

Both are ``tests/serve/server_app.py`` (one uvicorn worker, SQLite, Milvus Lite, the scripted LLM at ``--token-ms``);
the second has every part of memory on (recall, the summary and user facts, a recent window of 2 messages; its
scripted memory LLM folds every summary into one sentence and states every user message as a fact, since the load's
questions state none). Each run drives both, in alternating order (off first on even runs). Per server: turn time
p50 / p95, time to the first event, the server's own time per turn (``server_ms - engine_ms`` of the ``done``
event), turns per second and the server's CPU per turn; for memory on, how long its writes went on after the load's
last turn (``GET /v1/memory`` until ``pending_writes`` is 0) and how many failed.

Then, from the memory server's store file: per answer, its turn record's memory (what the turn read) and every
memory row (what the writes stored): recalled messages of another conversation, facts of another user read by a
turn, facts stored under another user's conversation, summaries owned by another user than their conversation's:
each must be 0. The bench stops with an error when no turn recalled a message or read a fact or a summary (it would
not have measured memory).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import httpx

import serve_load as load  # the bench this extends (its load client and figures)
from llama_index_convrag.storage.conversation import SQLiteConversationStore

MEMORY_ENV = {"CONVRAG_TEST_MEMORY": "recall,summary,facts", "CONVRAG_TEST_MEMORY_WINDOW": "2",
              "CONVRAG_TEST_MEMORY_FACTS": "every"}
#: turns per conversation at least: the third is the first whose recent window leaves a turn to recall
MIN_TURNS = 4
KINDS = ("off", "on")


def http_figures(run: "load.Run") -> Dict[str, float]:
    ms = {name: 1000 * load.pct(values, q) for name, values, q in (
        ("turn_p50", run.turn_s, .5), ("turn_p95", run.turn_s, .95), ("first_p50", run.first_s, .5),
        ("own_p50", run.own_s, .5), ("own_p95", run.own_s, .95))}
    ms["tps"], ms["cpu"] = run.turns_per_s, 1000 * run.cpu_s / run.sent
    return ms


def wait_writes(url: str, key: str, timeout: float = 900.0) -> Tuple[float, int]:
    """``(seconds until the memory server's writes were done, writes failed)``."""
    began = time.perf_counter()
    while True:
        body = httpx.get(url + "/v1/memory", headers={"Authorization": f"Bearer {key}"}, timeout=60).json()
        if body["pending_writes"] == 0 or time.perf_counter() - began > timeout:
            return time.perf_counter() - began, body["failed_writes"]
        time.sleep(0.2)


def crossings(store_path: Path, conversation_ids: List[str]) -> Dict[str, int]:
    """What the turns of ``conversation_ids`` read, and every memory row of the store, checked against owners."""
    store = SQLiteConversationStore(store_path)
    out = {"answers": 0, "recalled": 0, "read_facts": 0, "read_summary": 0, "recall_across": 0, "facts_across": 0}
    try:
        facts_of: Dict[str, set] = {}
        for cid in conversation_ids:
            owner = store.conversation_info(cid).owner
            if owner not in facts_of:
                facts_of[owner] = {f.id for f in store.list_facts(owner, include_history=True, embeddings=False)}
            messages = store.get_conversation(cid)
            ids = {m.id for m in messages}
            for m in messages:
                record = store.get_turn_record(m.id) if m.role == "assistant" else None
                memory = (record or {}).get("memory") or {}
                if not memory or "before" not in memory:
                    continue
                out["answers"] += 1
                recalled = [u["message_id"] for u in ((memory.get("recall") or {}).get("units") or [])]
                out["recalled"] += bool(recalled)
                out["recall_across"] += sum(r not in ids for r in recalled)
                out["read_facts"] += bool(memory.get("facts"))
                out["facts_across"] += sum(f["id"] not in facts_of[owner] for f in memory.get("facts") or [])
                out["read_summary"] += memory.get("summary") is not None
    finally:
        store.close()
    db = sqlite3.connect(store_path)
    try:
        out["fact_rows_across"] = db.execute(
            "SELECT COUNT(*) FROM convrag_facts f JOIN convrag_conversations c ON c.id = f.conversation_id "
            "WHERE c.owner != f.owner").fetchone()[0]
        out["summary_rows_across"] = db.execute(
            "SELECT COUNT(*) FROM convrag_summaries s JOIN convrag_conversations c ON c.id = s.conversation_id "
            "WHERE c.owner != s.owner").fetchone()[0]
        out["fact_rows"] = db.execute("SELECT COUNT(*) FROM convrag_facts").fetchone()[0]
    finally:
        db.close()
    return out


ROW = ("{n:>5} {kind:>4} | {turn_p50:>7.1f} / {turn_p95:>7.1f} | {first_p50:>6.1f} | {own_p50:>5.1f} / "
       "{own_p95:>5.1f} | {tps:>6.1f} | {cpu:>6.1f} | {writes}")
HEADER = (f"{'conv':>5} {'mem':>4} | {'turn p50/p95 ms':>17} | {'first':>6} | {'server own ms':>13} | "
          f"{'turns/s':>6} | {'CPU ms':>6} | memory writes after the load's last turn")


def compare(args: argparse.Namespace) -> int:
    from tests.serve.conftest import Server

    levels = [32] if args.quick else [int(x) for x in args.concurrency.split(",")]
    turns, repeat = max(MIN_TURNS, 2 if args.quick else args.turns), 1 if args.quick else args.repeat
    work = Path(tempfile.mkdtemp(prefix="convrag-serve-load-memory-"))
    env = load.server_env(args)
    keys: Dict[str, List[str]] = {}
    private_kb: Dict[str, str] = {}
    servers: Dict[str, Any] = {}
    for kind in KINDS:
        (work / kind).mkdir()
        with SQLiteConversationStore(work / kind / "chats.db") as store:
            keys[kind], private_kb[kind] = load.accounts(store)
    try:
        for kind in KINDS:
            on = {**MEMORY_ENV, **({"CONVRAG_TEST_MEMORY_WRITERS": str(args.memory_writers)}
                                   if args.memory_writers is not None else {})}
            servers[kind] = Server(work / kind, env={**env, **(on if kind == "on" else {})}).wait(300)
        probes = {kind: httpx.post(servers[kind].url + "/v1/conversations", json={"title": "probe"}, headers={
            "Authorization": f"Bearer {keys[kind][0]}"}).json()["id"] for kind in KINDS}
        rows: List[Tuple[int, str, Dict[str, float], str]] = []
        checks: List[Tuple[int, Dict[str, int]]] = []
        for n in levels:
            per: Dict[str, List[Dict[str, float]]] = {k: [] for k in KINDS}
            drains: List[Tuple[float, int]] = []
            for r in range(repeat):
                for kind in (KINDS if r % 2 == 0 else KINDS[::-1]):
                    srv = servers[kind]
                    cpu = load.process_cpu_s(srv.proc.pid)
                    run = load.run_clients([srv.url], n, turns, keys[kind][1:], (probes[kind], private_kb[kind]),
                                           load.client_processes(args, n))
                    if kind == "on":
                        drains.append(wait_writes(srv.url, keys[kind][0]))
                        checks.append((n, crossings(work / "on" / "chats.db", run.conversation_ids)))
                        checks[-1][1].update(cross_reads_not_404=run.cross_reads_not_404 + run.cross_kb_not_404,
                                             errors_5xx=run.errors_5xx)
                    run.cpu_s = load.process_cpu_s(srv.proc.pid) - cpu
                    per[kind].append(http_figures(run))
                    print(ROW.format(n=n, kind=kind, writes="", **per[kind][-1]), "  (one run)", file=sys.stderr,
                          flush=True)
            for kind in KINDS:
                writes = "" if kind == "off" else (f"{statistics.median(d[0] for d in drains):.1f} s, "
                                                   f"{sum(d[1] for d in drains)} failed")
                rows.append((n, kind, {k: statistics.median(f[k] for f in per[kind]) for k in per[kind][0]}, writes))
    finally:
        for srv in servers.values():
            srv.stop()
    print(f"convrag serve load with memory off and on side by side: 1 uvicorn worker each, SQLite, Milvus Lite, "
          f"scripted LLM {args.token_ms:g} ms/token, {turns} turns per conversation, 1 in {load.DISCONNECT_EVERY} "
          f"conversations disconnects on its first turn; memory on: recall, summary and facts, a window of 2 messages; "
          f"medians of {repeat} run(s) in alternating order; load average {os.getloadavg()[0]:.1f} at the end")
    print(HEADER)
    print("-" * len(HEADER))
    for n, kind, figures, writes in rows:
        print(ROW.format(n=n, kind=kind, writes=writes, **figures))
    print("\nmemory on, read from its store file after its writes were done:")
    measured = True
    for n, c in checks:
        across = c["recall_across"] + c["facts_across"] + c["fact_rows_across"] + c["summary_rows_across"]
        print(f"{n:>5} conversations: {c['answers']} answers with memory; {c['recalled']} recalled earlier messages, "
              f"{c['read_facts']} read facts, {c['read_summary']} read a summary; {c['fact_rows']} fact rows. Across "
              f"conversations or users: recalled messages {c['recall_across']}, facts read {c['facts_across']}, "
              f"fact rows {c['fact_rows_across']}, summary rows {c['summary_rows_across']}; reads of another user's "
              f"conversation or knowledge base not 404: {c['cross_reads_not_404']}, 5xx: {c['errors_5xx']} -> "
              f"{'OK' if across == 0 and c['cross_reads_not_404'] == 0 and c['errors_5xx'] == 0 else 'MISMATCH'}")
        measured = measured and c["recalled"] > 0 and c["read_facts"] > 0 and c["read_summary"] > 0
    if not measured:
        raise SystemExit("no turn recalled a message, read a fact or read a summary: memory was not measured")
    return 0
