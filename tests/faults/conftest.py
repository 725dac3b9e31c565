"""The fault suite's table: each test records one row (fault, survived, questions lost, how); printed at the end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

REPO = Path(__file__).resolve().parents[2]
ROWS: List[Dict[str, Any]] = []


@pytest.fixture
def fault_row() -> Callable[..., None]:
    """``fault_row(fault, survived=..., lost=..., how=...)`` adds this test's row to the printed table."""

    def record(fault: str, *, survived: bool, lost: int, how: str) -> None:
        ROWS.append({"fault": fault, "survived": survived, "lost": lost, "how": how})

    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not ROWS:
        return
    tr = terminalreporter
    tr.section("fault table (tests/faults)")
    tr.write_line("| fault | survived | questions lost | what happened |")
    tr.write_line("|---|---|---|---|")
    for r in ROWS:
        tr.write_line(f"| {r['fault']} | {'yes' if r['survived'] else 'NO'} | {r['lost']} | {r['how']} |")
    tr.write_line(f"survived {sum(r['survived'] for r in ROWS)}/{len(ROWS)}, "
                  f"questions lost {sum(r['lost'] for r in ROWS)}")


def child_env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CONVRAG_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def python(*args: str, **kw: Any) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], env=child_env(), cwd=str(REPO), **kw)


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 180.0) -> None:
    """Poll ``predicate`` (a bounded wait for a child process to reach a state; no timing is asserted)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what} after {timeout_s:.0f} s")
