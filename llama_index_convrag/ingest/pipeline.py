"""Ingest files into a Milvus collection: read -> split -> embed -> insert, idempotent by content hash.

* A file's document id is its resolved POSIX path; its ``content_hash`` (sha256 of the bytes) is kept in every
  chunk's metadata. Unchanged files are skipped, changed files have their old chunks deleted and re-inserted.
* ``delete_missing=True`` deletes chunks of files that were under a given folder and no longer exist.
* Chunk primary keys are deterministic: ``sha1(doc_id, content_hash, chunk index)``; ``chunk_count`` in metadata
  lets an interrupted run be detected (a document with missing chunks is re-ingested).
* Files without a reader (or whose optional parser is missing, or whose bytes are not text) are listed in
  ``IngestReport.unsupported`` with the reason.
* SIGINT (Ctrl-C) stops the run at the next batch boundary and raises :class:`IngestInterrupted` carrying the
  report of what was kept; re-running the same call resumes (stored documents are skipped, partly stored ones redone).
* The embedding model's window is read from the model (``max_input_tokens``, never assumed): chunks longer than it
  are counted in ``IngestReport.over_window`` and logged as a warning (their dense vector sees only the first
  ``embed_window`` tokens; BM25 sees the whole chunk). A model that states no window is warned about once.
* The stages overlap (:mod:`~llama_index_convrag.ingest.limits` bounds each): files are read and split while
  batches are embedded (:mod:`~llama_index_convrag.ingest.read_stage`; in worker processes when asked), several
  batches are embedded at once against a server (:mod:`~llama_index_convrag.ingest.embed_stage`), and one writer
  thread inserts the batches in order (:mod:`~llama_index_convrag.ingest.writer`). The rows stored do not depend on
  these bounds.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, TextIO, Tuple, Union

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode
from pymilvus import MilvusClient

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError, PathNotFoundError
from llama_index_convrag.ingest import changes
from llama_index_convrag.ingest.embed_stage import EmbeddedBatch, EmbedStage, FieldText, embed_batch
from llama_index_convrag.ingest.limits import PipelineLimits
from llama_index_convrag.ingest.prepare import Chunk, PreparedFile, chunk_id, file_chunks, file_hash  # noqa: F401
from llama_index_convrag.ingest.progress import (IngestInterrupted, Progress, StopRequest, make_progress,
                                                 stop_on_sigint)
from llama_index_convrag.ingest.read_stage import ReadStage, Task
from llama_index_convrag.ingest.report import IngestReport
from llama_index_convrag.ingest.writer import BatchWriter, delete_document
from llama_index_convrag.ingest.chunking import (DEFAULT_CHUNK_OVERLAP as CHUNK_OVERLAP, FALLBACK_CHUNK_SIZE,
                                                 build_splitter)
from llama_index_convrag.embeddings.identity import embed_model_id
from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.milvus.schema import (  # noqa: F401 - HIDDEN_METADATA_KEYS: public here too
    HIDDEN_METADATA_KEYS,
    CollectionSpec,
    check_embed_model,
    create_collection,
    default_spec,
    detect_spec,
    open_client,
)

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

#: Chunk size for a model that states no window; by default chunks are sized to the model's window (ingest/chunking.py)
DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP = FALLBACK_CHUNK_SIZE, CHUNK_OVERLAP
DEFAULT_BATCH_SIZE = 128


def collect_files(paths: Union[str, Path, Sequence[Union[str, Path]]], recursive: bool = True
                  ) -> Tuple[List[Path], List[Path]]:
    """(files, folders): every file under each folder (hidden ones excluded) plus the files given directly."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: List[Path] = []
    folders: List[Path] = []
    for raw in paths:
        p = Path(raw).expanduser().resolve()
        if p.is_dir():
            folders.append(p)
            found = p.rglob("*") if recursive else p.glob("*")
            files.extend(sorted(f for f in found if f.is_file()
                                and not any(part.startswith(".") for part in f.relative_to(p).parts)))
        elif p.is_file():
            files.append(p)
        else:
            raise PathNotFoundError(f"no such file or folder: {str(raw)!r}")
    seen, unique = set(), []
    for f in files:
        if f not in seen:
            seen.add(f)
            unique.append(f)
    return unique, folders


class Ingestor:
    """Holds the built parts; :meth:`run` ingests paths. Build with :meth:`from_defaults` or :func:`ingest`."""

    def __init__(
        self,
        *,
        client: MilvusClient,
        collection_name: str,
        spec: CollectionSpec,
        embed_model: BaseEmbedding,
        splitter: SentenceSplitter,
        batch_size: int = DEFAULT_BATCH_SIZE,
        field_texts: Optional[Mapping[str, FieldText]] = None,
        show_progress: bool = False,
        progress_every: Optional[float] = None,
        progress_stream: Optional[TextIO] = None,
        limits: Optional[PipelineLimits] = None,
    ) -> None:
        if spec.layout != "convrag":
            raise ConfigurationError(f"ingest writes the 'convrag' layout; collection {collection_name!r} is {spec.layout!r}")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size!r}")
        extra = set(spec.dense_fields[1:])
        given = set(field_texts or {})
        if given != extra:
            raise ConfigurationError(f"field_texts must give a text function for each extra dense field {sorted(extra)}, "
                             f"got {sorted(given)}")
        self.client = client
        self.collection_name = collection_name
        self.spec = spec
        self.embed_model = embed_model
        self.splitter = splitter
        self.batch_size = batch_size
        self.field_texts = dict(field_texts or {})
        self.show_progress = show_progress
        self.progress_every = progress_every
        self.progress_stream = progress_stream
        self.limits = limits if limits is not None else PipelineLimits()
        self._stop = StopRequest()

    @classmethod
    def from_defaults(
        cls,
        *,
        collection_name: str,
        embed_model: BaseEmbedding,
        client: Optional[MilvusClient] = None,
        target: Optional[MilvusTarget] = None,
        chunk_size: Optional[int] = None,
        chunk_overlap: Optional[int] = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        dim: Optional[int] = None,
        analyzer: str = "english",
        dense_index: Optional[Dict[str, Any]] = None,
        extra_dense_fields: Optional[Mapping[str, FieldText]] = None,
        show_progress: bool = False,
        progress_every: Optional[float] = None,
        progress_stream: Optional[TextIO] = None,
        embed_concurrency: Optional[int] = None,
        read_workers: Optional[int] = None,
    ) -> "Ingestor":
        """Connect, create the collection if missing (our layout), else read and check its layout.

        ``embed_concurrency`` (embedding requests in flight) and ``read_workers`` (reader processes) are chosen per
        run when ``None``; see :mod:`~llama_index_convrag.ingest.limits`.
        """
        limits = PipelineLimits(embed_concurrency=embed_concurrency, read_workers=read_workers)
        splitter = build_splitter(embed_model, chunk_size, chunk_overlap)  # None: sized to the model's window
        client = open_client(client, target)
        is_lite = target.is_lite if target is not None else True
        model_id = embed_model_id(embed_model)
        if client.has_collection(collection_name):
            spec = detect_spec(client, collection_name)
            check_embed_model(spec, model_id, collection_name)
        else:
            if dim is None:
                dim = len(embed_model.get_text_embedding("dimension probe"))
            spec = default_spec(dim, {name: dim for name in (extra_dense_fields or {})}, embed_model=model_id)
            create_collection(client, collection_name, spec, is_lite=is_lite, analyzer=analyzer,
                              dense_index=dense_index)
        return cls(client=client, collection_name=collection_name, spec=spec, embed_model=embed_model,
                   splitter=splitter, batch_size=batch_size, field_texts=extra_dense_fields,
                   show_progress=show_progress, progress_every=progress_every, progress_stream=progress_stream,
                   limits=limits)

    # -- collection state -------------------------------------------------------------------------------------
    def _stored_hashes(self, doc_ids: Sequence[str]) -> Dict[str, Optional[str]]:
        """The stored content hash of each of ``doc_ids`` in one query (see :mod:`.changes`)."""
        return changes.stored_hashes(self.client, self.collection_name, self.spec, doc_ids)

    def delete_document(self, doc_id: str) -> None:
        delete_document(self.client, self.collection_name, self.spec, doc_id)

    def stored_doc_ids(self, under: Optional[Path] = None) -> List[str]:
        """Document ids in the collection (those under folder ``under`` when given)."""
        return changes.stored_doc_ids(self.client, self.collection_name, self.spec, under)

    # -- pipeline ---------------------------------------------------------------------------------------------
    def _chunks(self, path: Path, doc_id: str, content_hash: str) -> List[BaseNode]:
        return file_chunks(path, doc_id, content_hash, self.splitter)

    def _tasks(self, files: Sequence[Path]) -> Iterator[Task]:
        """Each file with its stored hash; change detection asks Milvus once per window of files."""
        window = changes.LOOKUP_WINDOW
        for start in range(0, len(files), window):
            part = files[start : start + window]
            stored = self._stored_hashes([f.as_posix() for f in part])
            for f in part:
                yield f, stored[f.as_posix()]

    @dispatcher.span
    def run(self, paths: Union[str, Path, Sequence[Union[str, Path]]], *, delete_missing: bool = False,
            recursive: bool = True) -> IngestReport:
        """Ingest ``paths`` (files and/or folders); see the module docstring for the rules."""
        start = time.perf_counter()
        files, folders = collect_files(paths, recursive=recursive)
        report = IngestReport(collection_name=self.collection_name)
        progress = make_progress(files, show_bar=self.show_progress, lines_every=self.progress_every,
                                 stream=self.progress_stream)
        self._stop = StopRequest()
        limits = self.limits.resolved(self.embed_model, needs_nodes=bool(self.field_texts))
        writer = BatchWriter(self.client, self.collection_name, self.spec, queue_size=limits.write_queue,
                             on_stored=progress.chunks_stored)
        expected: Dict[str, int] = {}
        try:
            with stop_on_sigint(self._stop):
                self._ingest_files(files, report, progress, limits, writer, expected)
        finally:
            writer.close()  # also after a stop: what was handed to the writer is stored before the report says so
            progress.close()
        report.chunks, report.insert_seconds = sum(writer.stored.values()), writer.insert_seconds
        if self._stop.requested:
            report.total_seconds = time.perf_counter() - start
            self._interrupted(report, writer.stored, expected, files)
        _warn_window(self.embed_model, report)
        if delete_missing:
            for doc_id in changes.vanished(self.client, self.collection_name, self.spec, files, folders):
                self.delete_document(doc_id)
                report.deleted.append(doc_id)
        report.total_seconds = time.perf_counter() - start
        logger.info("%s", report)
        return report

    def _ingest_files(self, files: List[Path], report: IngestReport, progress: Progress, limits: PipelineLimits,
                      writer: BatchWriter, expected: Dict[str, int]) -> None:
        """Read, split, embed and hand ``files`` to the writer until done or a stop is requested; ``expected``
        receives the chunk count of each document read."""
        embedder = EmbedStage(lambda chunks: embed_batch(self.embed_model, self.spec.dense_fields, self.field_texts,
                                                         chunks, self._stop), concurrency=limits.embed_concurrency)
        pending: List[Chunk] = []
        try:
            with ReadStage(self.splitter, self.spec, workers=limits.read_workers, ahead=limits.read_ahead) as reader, \
                    contextlib.closing(reader.map(self._tasks(files))) as prepared_files:
                for prepared in prepared_files:
                    if self._stop.requested:
                        return
                    self._record(prepared, report, writer, expected)
                    progress.file_read(prepared.doc_id, prepared.size, len(prepared.chunks))
                    pending.extend(prepared.chunks)
                    while len(pending) >= self.batch_size:
                        head, pending = pending[: self.batch_size], pending[self.batch_size :]
                        if not self._hand_over(embedder.submit(head), report, writer):
                            return
            if pending and not self._stop.requested and not self._hand_over(embedder.submit(pending), report, writer):
                return
            self._hand_over(embedder.drain(), report, writer)
        finally:
            embedder.close()

    def _record(self, prepared: PreparedFile, report: IngestReport, writer: BatchWriter,
                expected: Dict[str, int]) -> None:
        """File ``prepared`` under its outcome in ``report``; a replaced document's old chunks go at its first insert."""
        doc_id, outcome = prepared.doc_id, prepared.outcome
        if outcome == "unchanged":
            report.unchanged.append(doc_id)
        elif outcome == "unsupported":
            report.unsupported.append((doc_id, prepared.reason))
            logger.info("unsupported %s: %s", doc_id, prepared.reason)
        elif outcome == "failed":
            report.failed.append((doc_id, prepared.reason))
            logger.warning("failed %s: %s", doc_id, prepared.reason)
        else:
            (report.updated if outcome == "updated" else report.added).append(doc_id)
            expected[doc_id] = len(prepared.chunks)
            if outcome == "updated":
                writer.replace(doc_id)

    def _hand_over(self, batches: List[Optional[EmbeddedBatch]], report: IngestReport, writer: BatchWriter) -> bool:
        """Give the embedded ``batches`` to the writer in order; False at the first one a stop request cut short."""
        for batch in batches:
            if batch is None or self._stop.requested:
                return False
            report.embed_seconds += batch.seconds
            report.embed_window, report.over_window = batch.window, report.over_window + batch.over_window
            writer.put(batch)
        return True

    def _interrupted(self, report: IngestReport, stored: Mapping[str, int], expected: Mapping[str, int],
                     files: List[Path]) -> None:
        """Say what an interrupted run kept (from the chunks the writer stored) and raise :class:`IngestInterrupted`."""
        complete = {d for d, n in expected.items() if stored.get(d, 0) == n}
        report.added = [d for d in report.added if d in complete]
        report.updated = [d for d in report.updated if d in complete]
        report.incomplete = sorted(d for d, n in expected.items() if 0 < stored.get(d, 0) < n)
        kept = {*report.added, *report.updated, *report.unchanged, *report.incomplete,
                *(p for p, _ in report.unsupported), *(p for p, _ in report.failed)}
        report.not_reached = sum(1 for f in files if f.as_posix() not in kept)
        report.interrupted = True
        logger.info("%s", report)  # the caller prints the report it receives: logging it too would say it twice
        raise IngestInterrupted(report)


def _warn_window(embed_model: BaseEmbedding, report: IngestReport) -> None:
    name = type(embed_model).__name__
    if report.chunks and report.embed_window is None:
        logger.warning("%s does not state its input window (max_input_tokens); chunks longer than it are embedded "
                       "truncated without notice", name)
    elif report.over_window:
        logger.warning("%d of %d chunks exceed %s's window of %d tokens: their dense vectors see only their start "
                       "(BM25 sees all of it); a chunk_size near the window avoids this", report.over_window,
                       report.chunks, name, report.embed_window)


def ingest(
    paths: Union[str, Path, Sequence[Union[str, Path]]],
    *,
    collection_name: str,
    embed_model: BaseEmbedding,
    client: Optional[MilvusClient] = None,
    target: Optional[MilvusTarget] = None,
    delete_missing: bool = False,
    recursive: bool = True,
    **options: Any,
) -> IngestReport:
    """Ingest files/folders into ``collection_name`` (created with our layout if missing).

    ``options`` go to :meth:`Ingestor.from_defaults` (chunk_size, chunk_overlap, batch_size, dim, analyzer,
    dense_index, extra_dense_fields, show_progress, progress_every, progress_stream, embed_concurrency,
    read_workers); unknown names are rejected.
    """
    accepted = {"chunk_size", "chunk_overlap", "batch_size", "dim", "analyzer", "dense_index",
                "extra_dense_fields", "show_progress", "progress_every", "progress_stream", "embed_concurrency",
                "read_workers"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ArgumentTypeError(f"unknown ingest option(s) {unknown}; accepted: {sorted(accepted)}")
    ingestor = Ingestor.from_defaults(collection_name=collection_name, embed_model=embed_model, client=client,
                                      target=target, **options)
    return ingestor.run(paths, delete_missing=delete_missing, recursive=recursive)
