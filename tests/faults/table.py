"""The fault table: each fault test's row travels in its report (``user_properties``) and is printed at the end.

A plugin loaded by ``tests/conftest.py``, so the process that prints the summary has it even when the tests ran in
worker processes (pytest-xdist), where ``tests/faults/conftest.py`` is never imported by the printing process.
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

ROWS: List[Dict[str, Any]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        ROWS.extend(value for key, value in report.user_properties if key == "fault_row")


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
