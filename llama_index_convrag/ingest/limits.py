"""How much of one ingest run happens at once: embedding requests in flight, reader processes, queue bounds.

``None`` means "chosen for this run" by :meth:`PipelineLimits.resolved`:

* ``embed_concurrency``: 1 for a model that computes in this process (the local ONNX model already uses every core;
  a second run beside it only competes), :data:`DEFAULT_EMBED_CONCURRENCY` for any other model (an embedding server
  answers several requests at once; one at a time leaves it idle while this process reads, parses and inserts).
* ``read_workers``: 0, reading and splitting in this process beside the embedding threads. With ``N >= 1`` they
  run in N worker processes (Python's GIL otherwise serialises them with response parsing and inserts): worth it
  for long runs on a machine with idle cores. The workers start from a ``forkserver``, which imports the main
  module again: a script must guard its top-level code with ``if __name__ == "__main__":``. Starting them costs
  seconds, so they are never chosen for you.

Memory stays bounded: at most ``read_ahead`` files are read ahead of embedding, ``embed_concurrency`` batches are
being embedded and ``write_queue`` embedded batches wait for the writer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.errors import ConfigurationError

DEFAULT_EMBED_CONCURRENCY = 4
DEFAULT_READ_AHEAD = 64
DEFAULT_WRITE_QUEUE = 4


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

    def resolved(self, embed_model: Any, *, needs_nodes: bool = False) -> "PipelineLimits":
        """A copy with every ``None`` replaced by this run's choice; ``needs_nodes`` (extra dense fields read each
        chunk's node, which stays in this process) keeps reading in this process."""
        if needs_nodes and self.read_workers:
            raise ConfigurationError(f"extra dense fields are computed from chunks made in this process: read_workers "
                                     f"must be 0 with extra_dense_fields, got {self.read_workers!r}")
        concurrency = self.embed_concurrency
        if concurrency is None:
            concurrency = 1 if computes_in_process(embed_model) else DEFAULT_EMBED_CONCURRENCY
        return replace(self, embed_concurrency=concurrency,
                       read_workers=0 if self.read_workers is None else self.read_workers)
