"""The fault suite's helpers; ``fault_row`` records a test's row of the table that ``tests/faults/table.py`` prints."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fault_row(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``fault_row(fault, survived=..., lost=..., how=...)`` adds this test's row to the printed table."""

    def record(fault: str, *, survived: bool, lost: int, how: str) -> None:
        row = {"fault": fault, "survived": survived, "lost": lost, "how": how}
        request.node.user_properties.append(("fault_row", row))

    return record


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
