"""How much of one ingest run happens at once: embedding requests in flight, reader processes, queue bounds.

``None`` means "chosen for this run" by :meth:`PipelineLimits.resolved`:

* ``embed_concurrency``: 1 for a model that computes in this process (the local ONNX model already uses every core;
  a second run beside it only competes), :data:`DEFAULT_EMBED_CONCURRENCY` for any other model (an embedding server
  answers several requests at once; one at a time leaves it idle while this process reads, parses and inserts).
* ``read_workers``: reading and splitting run in worker processes (Python's GIL would otherwise serialise them with
  response parsing and inserts) when the model is not in-process, the run has at least :data:`PROCESS_MIN_FILES`
  files and the machine has at least :data:`PROCESS_MIN_CPUS` cores; otherwise in this process, beside the
  embedding threads (starting and feeding processes costs more than small runs or a busy machine gain).

Memory stays bounded: at most ``read_ahead`` files are read ahead of embedding, ``embed_concurrency`` batches are
being embedded and ``write_queue`` embedded batches wait for the writer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Optional

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.errors import ConfigurationError

DEFAULT_EMBED_CONCURRENCY = 4
#: Runs with fewer files, or on fewer cores, read and split in this process.
PROCESS_MIN_FILES = 2000
PROCESS_MIN_CPUS = 4
DEFAULT_READ_AHEAD = 64
DEFAULT_WRITE_QUEUE = 4


def default_read_workers() -> int:
    """Reader processes for a large run: 0 below :data:`PROCESS_MIN_CPUS` cores, else one per core beyond two (this
    process and the database's), at most four."""
    cpus = os.cpu_count() or 1
    return 0 if cpus < PROCESS_MIN_CPUS else min(4, cpus - 2)


def computes_in_process(embed_model: Any) -> bool:
    """Whether ``embed_model`` computes its vectors in this process (the local model) rather than on a server."""
    return isinstance(embed_model, LocalMiniLMEmbedding)


@dataclass(frozen=True)
class PipelineLimits:
    """Bounds of one ingest run (see the module docstring); validated at construction."""

    embed_concurrency: Optional[int] = None
    read_workers: Optional[int] = None
    read_ahead: int = DEFAULT_READ_AHEAD
    write_queue: int = DEFAULT_WRITE_QUEUE

    def __post_init__(self) -> None:
        for name, low in (("embed_concurrency", 1), ("read_workers", 0), ("read_ahead", 1), ("write_queue", 1)):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise ConfigurationError(f"{name} must be an integer >= {low}, got {value!r}")

    def resolved(self, embed_model: Any, n_files: int) -> "PipelineLimits":
        """A copy with every ``None`` replaced by this run's choice."""
        local = computes_in_process(embed_model)
        concurrency = self.embed_concurrency
        if concurrency is None:
            concurrency = 1 if local else DEFAULT_EMBED_CONCURRENCY
        workers = self.read_workers
        if workers is None:
            workers = 0 if local or n_files < PROCESS_MIN_FILES else default_read_workers()
        return replace(self, embed_concurrency=concurrency, read_workers=workers)
