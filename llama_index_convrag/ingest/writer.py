"""The one writer of an ingest run: embedded batches go into Milvus in order, from one thread.

* A replaced document's old chunks are deleted just before the batch holding its first new chunk is inserted, so a
  run stopped before that keeps the old version whole.
* :meth:`BatchWriter.put` blocks while ``queue_size`` batches wait (memory bound); an insert error is raised by the
  next ``put`` or by :meth:`BatchWriter.close`.
* ``stored`` counts the chunks stored per document, read by the report and the progress display.
* Each insert and delete may take :data:`WRITE_TIMEOUT_S` seconds, pymilvus's retries included: Milvus Lite answers
  a write to a full disk with an error that pymilvus would otherwise retry, backing off, for minutes.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from typing import Any, Callable, Dict, List, Mapping, Optional, Set

from pymilvus import MilvusClient

from llama_index_convrag.ingest.embed_stage import EmbeddedBatch
from llama_index_convrag.milvus.filters import quote_string
from llama_index_convrag.milvus.schema import CollectionSpec

_DONE = object()

#: Seconds one insert or delete may take, retries included, before it fails (a batch normally stores in well under a
#: second; a write that hits a full disk fails at once and is retried by pymilvus 75 times over about 3.5 minutes).
WRITE_TIMEOUT_S = 15.0


def batch_rows(batch: EmbeddedBatch) -> List[Dict[str, Any]]:
    """Milvus rows of ``batch``: each chunk's row plus one vector per dense field."""
    rows = []
    for i, c in enumerate(batch.chunks):
        row = dict(c.row)
        row.update({name: vecs[i] for name, vecs in batch.vectors.items()})
        rows.append(row)
    return rows


def delete_document(client: MilvusClient, collection_name: str, spec: CollectionSpec, doc_id: str,
                    timeout: Optional[float] = None) -> None:
    """Delete the stored chunks of ``doc_id``; ``timeout``: seconds the call may take, retries included."""
    client.delete(collection_name, filter=f"{spec.doc_id_field} == {quote_string(doc_id)}", timeout=timeout)


class BatchWriter:
    """Inserts batches on one thread, in the order given; use as a context manager or call :meth:`close`.

    ``write_timeout``: seconds one insert or delete may take, retries included (None: pymilvus's own retries)."""

    def __init__(self, client: MilvusClient, collection_name: str, spec: CollectionSpec, *, queue_size: int,
                 on_stored: Optional[Callable[[Mapping[str, int]], None]] = None,
                 write_timeout: Optional[float] = WRITE_TIMEOUT_S) -> None:
        self.client = client
        self.write_timeout = write_timeout
        self.collection_name = collection_name
        self.spec = spec
        self.on_stored = on_stored
        self.stored: Counter = Counter()
        self.insert_seconds = 0.0
        self._replace: Set[str] = set()
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=queue_size)
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._work, name="convrag-insert", daemon=True)
        self._thread.start()

    def replace(self, doc_id: str) -> None:
        """Delete the stored chunks of ``doc_id`` before its first new chunk is inserted."""
        self._replace.add(doc_id)

    def put(self, batch: EmbeddedBatch) -> None:
        self._raise_error()
        self._queue.put(batch)

    def close(self) -> None:
        """Wait until every batch put is stored; raise the insert error if one happened."""
        if self._thread.is_alive():
            self._queue.put(_DONE)
            self._thread.join()
        self._raise_error()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _work(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is _DONE:
                return
            if self._error is not None:
                continue  # drain: the caller learns of the error on its next put or at close
            try:
                self._store(batch)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                self._error = exc

    def _store(self, batch: EmbeddedBatch) -> None:
        t = time.perf_counter()
        counts = Counter(c.doc_id for c in batch.chunks)
        for doc_id in counts:
            if doc_id in self._replace:
                self._replace.discard(doc_id)
                delete_document(self.client, self.collection_name, self.spec, doc_id, self.write_timeout)
        self.client.insert(self.collection_name, batch_rows(batch), timeout=self.write_timeout)
        self.insert_seconds += time.perf_counter() - t
        self.stored.update(counts)
        if self.on_stored is not None:
            self.on_stored(counts)
