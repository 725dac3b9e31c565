"""Read and split files ahead of embedding, in file order: in this thread, or in worker processes.

:class:`ReadStage` maps :func:`~llama_index_convrag.ingest.prepare.prepare_file` over ``(path, stored_hash)`` tasks
and yields the results in the order of the tasks. With ``workers=0`` each file is prepared when the consumer asks for
it; with ``workers>=1`` up to ``ahead`` files are prepared at once in a process pool. Worker processes are forked from
a ``forkserver`` (a fresh interpreter that has imported this module once), never from this multi-threaded process,
receive the splitter once, pickled, when they start, and send back chunks as rows (texts, metadata, LlamaIndex's node
fields built there), without their nodes.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import pickle
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Deque, Iterable, Iterator, Optional, Tuple

from llama_index.core.node_parser import NodeParser
from llama_index.core.utils import get_tokenizer

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.ingest.prepare import PreparedFile, prepare_file
from llama_index_convrag.milvus.schema import CollectionSpec

#: One file to prepare: its path and the content hash stored for it (see ``prepare_file``).
Task = Tuple[Path, Optional[str]]

_worker_splitter: Optional[NodeParser] = None
_worker_spec: Optional[CollectionSpec] = None


def load_splitter(data: bytes) -> NodeParser:
    """A splitter from :func:`pickle_splitter`, in another process.

    LlamaIndex's default tokenizer loads its tiktoken encoding from files bundled with llama-index-core; loaded
    first, the pickled splitter's encoding is found in tiktoken's registry instead of being downloaded.
    """
    get_tokenizer()
    splitter: NodeParser = pickle.loads(data)
    return splitter


def _start_worker(splitter_bytes: bytes, spec: CollectionSpec) -> None:
    global _worker_splitter, _worker_spec
    _worker_splitter, _worker_spec = load_splitter(splitter_bytes), spec


def _prepare_in_worker(path: Path, stored_hash: Optional[str]) -> PreparedFile:
    assert _worker_splitter is not None and _worker_spec is not None, "worker started without a splitter"
    return prepare_file(path, stored_hash, _worker_splitter, _worker_spec, keep_nodes=False)


class _QuietPickleNotes(logging.Filter):
    """LlamaIndex logs each private attribute it leaves out of a pickle (rebuilt on load) as a root warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(("Removing unpickleable", "Removing unpicklable"))


def pickle_splitter(splitter: NodeParser) -> bytes:
    """``splitter`` pickled (LlamaIndex components rebuild their unpicklable parts from their fields on load)."""
    quiet = _QuietPickleNotes()
    root = logging.getLogger()
    root.addFilter(quiet)
    try:
        return pickle.dumps(splitter)
    except Exception as exc:  # noqa: BLE001 - any pickling failure means the same thing to the caller
        raise ConfigurationError(f"the splitter {type(splitter).__name__} cannot be sent to reader processes "
                                 f"({type(exc).__name__}: {exc}); pass read_workers=0") from exc
    finally:
        root.removeFilter(quiet)


class ReadStage:
    """Prepared files in task order; use as a context manager (it owns the worker processes)."""

    def __init__(self, splitter: NodeParser, spec: CollectionSpec, *, workers: int, ahead: int) -> None:
        if workers < 0 or ahead < 1:
            raise ConfigurationError(f"workers must be >= 0 and ahead >= 1, got {workers!r} and {ahead!r}")
        self.splitter = splitter
        self.spec = spec
        self.workers = workers
        self.ahead = ahead
        self._pool: Optional[ProcessPoolExecutor] = None

    def __enter__(self) -> "ReadStage":
        if self.workers:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload([__name__])
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=_start_worker,
                                             initargs=(pickle_splitter(self.splitter), self.spec))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def map(self, tasks: Iterable[Task]) -> Iterator[PreparedFile]:
        """Prepare each task's file; results in task order. Stopping iteration early cancels what was not started."""
        if self._pool is None:
            for path, stored in tasks:
                yield prepare_file(path, stored, self.splitter, self.spec)
            return
        pending: Deque[Future] = deque()
        with contextlib.ExitStack() as cleanup:
            cleanup.callback(lambda: [f.cancel() for f in pending])
            for path, stored in tasks:
                pending.append(self._pool.submit(_prepare_in_worker, path, stored))
                if len(pending) >= self.ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
