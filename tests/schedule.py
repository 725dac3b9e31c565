"""The order test files start in: the longest first, so that none of them starts last and stretches the run.

``pytest -n 4 --dist loadfile`` hands whole files to the workers in collection order; a file that runs for minutes
and starts when the others are nearly done decides the run's wall time. A plugin loaded by ``tests/conftest.py``:
every worker reorders its collection the same way (the scheduler needs the same order from all of them).
"""

from __future__ import annotations

from typing import List

import pytest

#: Worker seconds of the longest files in a full run (-n 4 on the 2-core machine at load 12-20, where every file ran
#: about 3x its quiet time), longest first. Mostly waits on Ray, servers, kernels and subprocesses, which overlap
#: with the CPU work of the other workers when they start early. Re-measure with ``--durations`` when files change.
LONG_FILES = (
    "tests/test_readme.py",  # 597 s: the README quick start ingests docs/ and chats through the local server
    "tests/ingest/test_distributed.py",  # 458 s: a local Ray cluster and a Milvus server process
    "tests/synthesizers/test_extractive.py",  # 395 s: its README test ingests docs/ (repository_docs)
    "tests/cli_commands/test_conversation_limits.py",  # 395 s
    "tests/test_cli.py",  # 381 s: CLI subprocesses and two tiny evaluations
    "tests/cli_commands/test_docs_questions.py",  # 366 s: ingests docs/ (repository_docs)
    "tests/faults/test_faults.py",  # 362 s: kill -9 of servers and ingests
    "tests/serve/test_memory.py",  # 275 s: a convrag serve process
    "tests/serve/test_workers.py",  # 260 s: a two-worker convrag serve
    "tests/cli_commands/test_topic_change.py",  # 257 s: ingests four man pages
    "tests/milvus/test_lite_lock.py",  # 229 s: processes racing for one Milvus Lite file
    "tests/cli_commands/test_failures.py",  # 198 s
    "tests/serve/test_api.py",  # 191 s
    "tests/web/test_memory_panel.py",  # 184 s: Chromium and a server
    "tests/test_notebooks.py",  # 149 s: four Jupyter kernels
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Move the items of :data:`LONG_FILES` to the front in that order; the rest keep theirs (the sort is stable)."""
    rank = {path: i for i, path in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
