"""Embed batches of chunks with a bounded number of requests in flight, results in submission order.

:func:`embed_batch` turns one batch of chunks into :class:`EmbeddedBatch` (the texts and one list of vectors per
dense field), checking the stop flag between the model's own sub-batches. :class:`EmbedStage` runs it on
``concurrency`` threads: an embedding server answers several requests at once while this process waits on the
network, so the threads are not held back by the GIL. :meth:`EmbedStage.submit` blocks while ``concurrency``
batches are in flight, which bounds memory.
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Deque, Dict, List, Mapping, Optional, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode

from llama_index_convrag.embeddings.windows import count_over_window
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.ingest.prepare import Chunk
from llama_index_convrag.ingest.progress import StopRequest

#: Extra dense fields: field name -> text of a chunk to embed into it (e.g. the title).
FieldText = Callable[[BaseNode], str]


@dataclass
class EmbeddedBatch:
    """One batch ready to store: its chunks, vectors per dense field, and what embedding it cost."""

    chunks: List[Chunk]
    vectors: Dict[str, List[List[float]]]
    seconds: float
    window: Optional[int]
    over_window: int


def embed_texts(embed_model: BaseEmbedding, texts: Sequence[str], stop: StopRequest) -> Optional[List[List[float]]]:
    """Vectors of ``texts`` in the model's batch size; ``None`` when a stop was requested in between."""
    step = getattr(embed_model, "embed_batch_size", len(texts)) or len(texts)
    vectors: List[List[float]] = []
    for i in range(0, len(texts), step):
        if stop.requested:
            return None
        vectors.extend(embed_model.get_text_embedding_batch(list(texts[i : i + step])))
    return vectors


def embed_batch(embed_model: BaseEmbedding, dense_fields: Sequence[str], field_texts: Mapping[str, FieldText],
                chunks: List[Chunk], stop: StopRequest) -> Optional[EmbeddedBatch]:
    """Embed ``chunks`` into the first of ``dense_fields`` (their text) and each extra field (its text function of
    the chunk's node); ``None`` when a stop was requested before the batch was done."""
    t0 = time.perf_counter()
    texts = [c.text for c in chunks]
    window, over = count_over_window(embed_model, texts)
    vectors: Dict[str, List[List[float]]] = {}
    for name, field_batch in [(dense_fields[0], texts),
                              *[(name, [fn(_node(c)) for c in chunks]) for name, fn in field_texts.items()]]:
        embedded = embed_texts(embed_model, field_batch, stop)
        if embedded is None:
            return None
        vectors[name] = embedded
    return EmbeddedBatch(chunks, vectors, time.perf_counter() - t0, window, over)


def _node(chunk: Chunk) -> BaseNode:
    if chunk.node is None:
        raise ConfigurationError("extra dense fields are computed from chunks made in this process: "
                                 "read_workers must be 0 with extra_dense_fields")
    return chunk.node


class EmbedStage:
    """Up to ``concurrency`` batches embedded at once on threads; finished batches come back in submission order."""

    def __init__(self, embed: Callable[[List[Chunk]], Optional[EmbeddedBatch]], *, concurrency: int) -> None:
        if concurrency < 1:
            raise ConfigurationError(f"embed_concurrency must be >= 1, got {concurrency!r}")
        self.embed = embed
        self.concurrency = concurrency
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="convrag-embed")
        self._in_flight: Deque[Future] = deque()

    def submit(self, chunks: List[Chunk]) -> List[Optional[EmbeddedBatch]]:
        """Start embedding ``chunks``; first waits for the oldest batch while ``concurrency`` are in flight.

        Returns the batches finished in order so far (``None`` for one stopped by a stop request); an embedding
        error is raised here.
        """
        done = []
        while len(self._in_flight) >= self.concurrency:
            done.append(self._in_flight.popleft().result())
        self._in_flight.append(self._pool.submit(self.embed, chunks))
        while self._in_flight and self._in_flight[0].done():
            done.append(self._in_flight.popleft().result())
        return done

    def drain(self) -> List[Optional[EmbeddedBatch]]:
        """Wait for every batch in flight; their results in order."""
        done = []
        while self._in_flight:
            done.append(self._in_flight.popleft().result())
        return done

    def close(self) -> None:
        """Wait for the threads (a request already sent finishes; nothing new starts)."""
        for future in self._in_flight:
            future.cancel()
        self._in_flight.clear()
        self._pool.shutdown(wait=True)
