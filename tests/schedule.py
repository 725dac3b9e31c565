"""The order test files start in: the longest first, so that none of them starts last and stretches the run.

``pytest -n 4 --dist loadfile`` hands whole files to the workers in collection order; a file that runs for minutes
and starts when the others are nearly done decides the run's wall time. A plugin loaded by ``tests/conftest.py``:
every worker reorders its collection the same way (the scheduler needs the same order from all of them), and the
controller turns off pytest-xdist's own reordering (since 3.6 it sorts the files by their number of tests, most first,
so that a long file of few tests, such as the README's or the Ray engine's, started last).
"""

from __future__ import annotations

from typing import List

import pytest

#: Worker seconds of the longest files in a full run (-n 4 on the 2-core machine at load 12-20, where every file ran
#: about 3x its quiet time), longest first. Mostly waits on Ray, servers, kernels and subprocesses, which overlap
#: with the CPU work of the other workers when they start early. Re-measure with ``--durations`` when files change.
LONG_FILES = (
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
    "tests/test_readme.py",  # about 170 s: the README quick start ingests four pages of docs/ and chats through the
    # local server (597 s when it ingested all of docs/: 28 against about 100 s of CPU)
    "tests/test_notebooks.py",  # 149 s: four Jupyter kernels
)


def pytest_configure(config: pytest.Config) -> None:
    """Keep the collection order for the workers: pytest-xdist's ``--no-loadscope-reorder``, set here (its option is
    absent without pytest-xdist)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Move the items of :data:`LONG_FILES` to the front in that order; the rest keep theirs (the sort is stable)."""
    rank = {path: i for i, path in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
