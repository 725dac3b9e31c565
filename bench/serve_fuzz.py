"""A longer property-based fuzz of ``convrag serve`` from its OpenAPI schema (schemathesis) than the suite's bounded
run (``tests/serve/test_fuzz.py``): every operation, ``--examples`` generated requests each, against a real uvicorn
process (``tests/serve/server_app.py``: SQLite store, Milvus Lite, the local embedding model, a ScriptedLLM).

Each request with ids in its path is sent twice: as drawn, and with the ids of a real conversation (made fresh for
each operation, with one answered turn) and its answer. Checks every answer: never a 5xx, and every 4xx in the one
error shape (``{"error": {type, code, message, param}}``). A failing example does not stop the run: it is counted and
the first few are printed. Prints one row per operation (calls, statuses seen, failures) and the totals; exits 1 when
anything failed.

    python bench/serve_fuzz.py --examples 100          # --seed S for another derandomised draw
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Counter, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import schemathesis  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

from tests.serve.conftest import Server  # noqa: E402

ERROR_KEYS = {"type", "code", "message", "param"}


def problem(response: Any) -> str:
    """Why an answer breaks the contract ('' when it keeps it)."""
    if response.status_code >= 500:
        return f"{response.status_code} {response.text[:200]}"
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            return f"{response.status_code} not JSON: {response.text[:200]}"
        if not (isinstance(body, dict) and set(body) == {"error"} and isinstance(body["error"], dict)
                and set(body["error"]) == ERROR_KEYS):
            return f"{response.status_code} not the error shape: {response.text[:200]}"
    return ""


def real_ids(url: str) -> Dict[str, str]:
    """A fresh conversation with one answered turn: its ids, by the path parameter names of the schema."""
    with httpx.Client(base_url=url, timeout=120) as client:
        cid = client.post("/v1/conversations", json={"title": "fuzz"}).json()["id"]
        turn = client.post(f"/v1/conversations/{cid}/messages", json={"content": "What is BM25?", "stream": False})
        turn.raise_for_status()
        docs = client.get("/v1/documents").json().get("data", [])
    ids = {"conversation_id": cid, "message_id": turn.json()["assistant_message_id"]}
    if docs:
        ids["doc_id"] = docs[0].get("doc_id", docs[0].get("id", ""))
    return ids


def fuzz_operation(operation: Any, examples: int, draw_seed: int, ids: Dict[str, str], statuses: Counter[int],
                   failures: List[str]) -> None:
    """Each generated request twice: as drawn, and with its path's ids replaced by real ones (drawn ids are
    unknown: they only reach the 404 path)."""

    @seed(draw_seed)
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy())
    def check(case: Any) -> None:
        known = {k: ids[k] for k in (case.path_parameters or {}) if k in ids}
        for params in ([dict(case.path_parameters)] if case.path_parameters else []) + ([known] if known else []):
            case.path_parameters = {**case.path_parameters, **params}
            call(case)
        if not case.path_parameters:
            call(case)

    def call(case: Any) -> None:
        response = case.call(timeout=60)
        statuses[response.status_code] += 1
        why = problem(response)
        if why:
            failures.append(f"{case.method} {case.formatted_path}: {why}")

    check()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100, help="generated requests per operation")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    server = Server(Path(tempfile.mkdtemp(prefix="convrag-serve-fuzz-")),
                    env={"CONVRAG_TEST_TOKEN_DELAY": "0"}).wait(300)
    rows: List[Dict[str, Any]] = []
    failures: List[str] = []
    started = time.perf_counter()
    try:
        schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        for operation in operations:
            statuses: Counter[int] = collections.Counter()
            before = len(failures)
            fuzz_operation(operation, args.examples, args.seed, real_ids(server.url), statuses, failures)
            rows.append({"operation": f"{operation.method.upper()} {operation.path}", "calls": sum(statuses.values()),
                         "statuses": dict(sorted(statuses.items())), "failures": len(failures) - before})
    finally:
        server.stop()
    elapsed = time.perf_counter() - started
    print(f"schemathesis fuzz of convrag serve: {len(rows)} operations, up to {args.examples} examples each, seed "
          f"{args.seed}; one uvicorn worker, no API keys (the open user on loopback)")
    print("| operation | calls | statuses | failures |\n|---|---|---|---|")
    for row in rows:
        seen = ", ".join(f"{s} x{n}" for s, n in row["statuses"].items())
        print(f"| {row['operation']} | {row['calls']} | {seen} | {row['failures']} |")
    total: Counter[int] = collections.Counter()
    for row in rows:
        total.update(row["statuses"])
    calls = sum(total.values())
    print(f"\ntotal: {calls} calls in {elapsed:.0f} s; 2xx {sum(n for s, n in total.items() if s < 300)}, 4xx "
          f"{sum(n for s, n in total.items() if 400 <= s < 500)}, 5xx {sum(n for s, n in total.items() if s >= 500)}; "
          f"answers breaking the contract (5xx, or a 4xx not in the one error shape): {len(failures)}")
    for line in failures[:10]:
        print("  " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
