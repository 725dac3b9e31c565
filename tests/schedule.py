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

#: Worker seconds of the longest files in a full run (-n 4 on the 2-core machine at load about 20, where every file
#: ran about 4x its quiet time; files whose server did not start in time there carry an earlier run's figure), longest
#: first: every file of 100 s or more, since the others start in collection order. Mostly waits on Ray, servers,
#: kernels and subprocesses, which overlap with the CPU work of the other workers when they start early.
#: Re-measure with ``--durations`` (or ``--junitxml``, summed by file) when files change.
LONG_FILES = (
    "tests/test_cli.py",  # 487 s: CLI subprocesses and two tiny evaluations
    "tests/faults/test_faults.py",  # 469 s: kill -9 of servers and ingests
    "tests/test_package_install.py",  # 312 s: builds and installs the package
    "tests/cli_commands/test_topic_change.py",  # 300 s: ingests four man pages
    "tests/evaluation/test_retrieval.py",  # 288 s
    "tests/milvus/test_lite_lock.py",  # 282 s: processes racing for one Milvus Lite file
    "tests/serve/test_workers.py",  # 282 s: a two-worker convrag serve
    "tests/serve/test_memory.py",  # 275 s (earlier run): a convrag serve process
    "tests/cli_commands/test_failures.py",  # 258 s
    "tests/web/test_chat_page.py",  # 136 s with its server not starting: Chromium and a server
    "tests/ingest/test_pipeline.py",  # 225 s
    "tests/test_embeddings_quantize.py",  # 192 s
    "tests/serve/test_api.py",  # 191 s (earlier run)
    "tests/web/test_memory_panel.py",  # 184 s (earlier run): Chromium and a server
    "tests/cli_commands/test_conversation_limits.py",  # about 170 s: 450 s before its tests shared one collection
    # (25 against 66 CPU-s)
    "tests/test_readme.py",  # about 170 s: the quick start ingests four pages of docs/ and chats through the local
    # server (349 s, 597 s in an earlier run, when it ingested all of docs/: 28 against about 100 CPU-s)
    "tests/test_notebooks.py",  # 169 s: four Jupyter kernels
    "tests/evaluation/test_conversation.py",  # 154 s
    "tests/test_imports.py",  # 150 s
    "tests/chat/test_memory_engine.py",  # 147 s
    "tests/ingest/test_chunking.py",  # 144 s
    "tests/web/test_api_key.py",  # 133 s: Chromium and a server
    "tests/serve/test_knowledge.py",  # 132 s
    "tests/ingest/test_distributed.py",  # about 120 s: a local Ray cluster and a Milvus server process (64 s alone
    # at load 14; 458 s when its workers ran at Ray's niceness 15 and waited behind every other file for a core)
    "tests/serve/test_crash.py",  # 108 s
    "tests/ingest/test_read_stage.py",  # 107 s
    "tests/ingest/test_writer.py",  # 105 s
    # Last of the long files: most of their time (328 and 302 s) was waiting for docs/ (``repository_docs``), which
    # now starts building in the background at the first test; by the time a worker reaches them it is built.
    "tests/synthesizers/test_extractive.py",
    "tests/cli_commands/test_docs_questions.py",
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
