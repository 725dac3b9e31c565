"""Every divergence row of docs/COMPATIBILITY.md has its test, and every divergence test names a row there.

A row is a table line whose first cell is a backquoted, hyphenated id (``| `answer-label-stripped` | ...``); a test
names it with ``@divergence("answer-label-stripped")`` (``tests/differential/harness.py``) or
``@pytest.mark.divergence("...")``.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ID = r"[a-z0-9]+(?:-[a-z0-9]+)+"
"""A row id: lower-case words joined by hyphens (a mode name such as ``context`` in another table is not one)."""
ROW = re.compile(rf"^\| `({ID})` \|", re.M)
MARK = re.compile(rf"""divergence\(\s*["']({ID})["']\s*\)""")


def documented_rows() -> set:
    return set(ROW.findall((ROOT / "docs" / "COMPATIBILITY.md").read_text(encoding="utf-8")))


def rows_named_by_tests() -> set:
    return {row for path in (ROOT / "tests").rglob("*.py") if path != Path(__file__)
            for row in MARK.findall(path.read_text(encoding="utf-8"))}


def test_each_documented_divergence_has_a_test_and_each_test_a_row():
    documented, tested = documented_rows(), rows_named_by_tests()
    assert len(documented) >= 30
    assert sorted(documented - tested) == [], "rows without a test"
    assert sorted(tested - documented) == [], "tests naming no row"


def test_the_row_pattern():
    assert ROW.findall("| `answer-label-stripped` | core | ours |\n| `context` | x |") == ["answer-label-stripped"]
    assert MARK.findall('@divergence("a-b")\n@pytest.mark.divergence(\'c-d\')') == ["a-b", "c-d"]
