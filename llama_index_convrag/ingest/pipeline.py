"""Ingest files into a Milvus collection: read -> split -> embed (batched) -> insert, idempotent by content hash.

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
* Inserting a batch overlaps with embedding the next one (one background insert at a time, in order).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TextIO, Tuple, Union

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, MetadataMode
from pymilvus import MilvusClient

from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError, PathNotFoundError
from llama_index_convrag.embeddings.windows import count_over_window
from llama_index_convrag.ingest.chunking import (DEFAULT_CHUNK_OVERLAP as CHUNK_OVERLAP, FALLBACK_CHUNK_SIZE,
                                                 build_splitter)
from llama_index_convrag.ingest.progress import IngestInterrupted, StopRequest, make_progress, stop_on_sigint
from llama_index_convrag.ingest.readers import UnsupportedFile, read_file
from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.milvus.filters import quote_string
from llama_index_convrag.milvus.schema import (
    HIDDEN_METADATA_KEYS,
    CollectionSpec,
    create_collection,
    default_spec,
    detect_spec,
    llamaindex_fields,
    open_client,
)

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

#: Chunk size for a model that states no window; by default chunks are sized to the model's window (ingest/chunking.py)
DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP = FALLBACK_CHUNK_SIZE, CHUNK_OVERLAP
DEFAULT_BATCH_SIZE = 128
#: Files whose stored hashes one query fetches (change detection); one query per file cost about half of the
#: ingest time with a fast embedding server (``bench/ingest_throughput.py``).
LOOKUP_WINDOW = 64
#: Milvus' largest query ``limit`` (offset + limit <= 16384).
QUERY_LIMIT = 16384
#: Extra dense fields: field name -> text of a chunk to embed into it (e.g. the title).
FieldText = Callable[[BaseNode], str]


@dataclass
class IngestReport:
    """What one :func:`ingest` run did; ``str()`` is a summary, :meth:`to_json` a JSON object.

    ``unchanged`` lists files already stored with the same content; files that were not ingested are in
    ``unsupported`` (no reader, binary) or ``failed`` (the parser or the file system failed), each with a reason.
    After an interruption ``incomplete`` lists documents partly stored and ``not_reached`` counts files not looked
    at; ``added``/``updated`` then hold only documents stored completely.
    """

    collection_name: str
    added: List[str] = field(default_factory=list)
    updated: List[str] = field(default_factory=list)
    unchanged: List[str] = field(default_factory=list)
    deleted: List[str] = field(default_factory=list)
    unsupported: List[Tuple[str, str]] = field(default_factory=list)
    failed: List[Tuple[str, str]] = field(default_factory=list)
    chunks: int = 0
    embed_seconds: float = 0.0
    insert_seconds: float = 0.0
    total_seconds: float = 0.0
    embed_window: Optional[int] = None
    over_window: int = 0
    interrupted: bool = False
    incomplete: List[str] = field(default_factory=list)
    not_reached: int = 0

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["unsupported"] = [{"path": p, "reason": r} for p, r in self.unsupported]
        d["failed"] = [{"path": p, "reason": r} for p, r in self.failed]
        return d

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @property
    def chunks_per_second(self) -> float:
        busy = self.embed_seconds + self.insert_seconds
        return self.chunks / busy if busy > 0 else 0.0

    def __str__(self) -> str:
        lines = [
            f"collection {self.collection_name}: {len(self.added)} added, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged, {len(self.deleted)} deleted, {len(self.unsupported)} unsupported, "
            f"{len(self.failed)} failed",
            f"{self.chunks} chunks; embedding {self.embed_seconds:.1f} s, insert {self.insert_seconds:.1f} s, "
            f"total {self.total_seconds:.1f} s",
        ]
        if self.over_window:
            lines.append(f"  {self.over_window} of {self.chunks} chunks exceed the embedding model's window of "
                         f"{self.embed_window} tokens (dense vectors see their start only)")
        lines += [f"  unsupported: {p} ({r})" for p, r in self.unsupported]
        lines += [f"  failed: {p} ({r})" for p, r in self.failed]
        if self.interrupted:
            lines.append(f"interrupted: kept {len(self.added) + len(self.updated)} documents completely "
                         f"({self.chunks} chunks); {len(self.incomplete)} partly stored, {self.not_reached} files "
                         f"not reached; re-run the same command to resume (stored files are skipped)")
        return "\n".join(lines)


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def chunk_id(doc_id: str, content_hash: str, index: int) -> str:
    return hashlib.sha1(f"{doc_id}\0{content_hash}\0{index}".encode("utf-8")).hexdigest()


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
        self._inserter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="convrag-insert")
        self._inserting: Optional[Future] = None
        self.progress_every = progress_every
        self.progress_stream = progress_stream
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
    ) -> "Ingestor":
        """Connect, create the collection if missing (our layout), else read and check its layout."""
        splitter = build_splitter(embed_model, chunk_size, chunk_overlap)  # None: sized to the model's window
        client = open_client(client, target)
        is_lite = target.is_lite if target is not None else True
        if client.has_collection(collection_name):
            spec = detect_spec(client, collection_name)
        else:
            if dim is None:
                dim = len(embed_model.get_text_embedding("dimension probe"))
            spec = default_spec(dim, {name: dim for name in (extra_dense_fields or {})})
            create_collection(client, collection_name, spec, is_lite=is_lite, analyzer=analyzer,
                              dense_index=dense_index)
        return cls(client=client, collection_name=collection_name, spec=spec, embed_model=embed_model,
                   splitter=splitter, batch_size=batch_size, field_texts=extra_dense_fields,
                   show_progress=show_progress, progress_every=progress_every, progress_stream=progress_stream)

    # -- collection state -------------------------------------------------------------------------------------
    def _stored_hashes(self, doc_ids: Sequence[str]) -> Dict[str, Optional[str]]:
        """The stored content hash of each of ``doc_ids`` in one query (``None`` if absent; ``""`` if its chunks are
        incomplete, e.g. after an interrupted run, so that it is re-ingested). A window whose chunks pass Milvus'
        query limit is asked one document at a time, and such a document's chunks are counted by Milvus."""
        doc_field, meta_field = self.spec.doc_id_field, self.spec.metadata_field
        expr = f"{doc_field} in [{', '.join(quote_string(d) for d in doc_ids)}]"
        rows = self.client.query(self.collection_name, filter=expr, output_fields=[doc_field, meta_field],
                                 limit=QUERY_LIMIT)
        if len(rows) < QUERY_LIMIT:
            count = Counter(row[doc_field] for row in rows)
        elif len(doc_ids) > 1:
            return {d: self._stored_hashes([d])[d] for d in doc_ids}
        else:  # one document of more chunks than a query returns: count them server-side
            count = Counter({doc_ids[0]: self.client.query(self.collection_name, filter=expr,
                                                           output_fields=["count(*)"])[0]["count(*)"]})
        meta: Dict[str, Dict[str, Any]] = {}
        for row in rows:
            meta.setdefault(row[doc_field], row.get(meta_field) or {})
        out: Dict[str, Optional[str]] = {}
        for d in doc_ids:
            if d not in count:
                out[d] = None
            elif meta[d].get("chunk_count") != count[d]:
                out[d] = ""
            else:
                out[d] = meta[d].get("content_hash", "")
        return out

    def delete_document(self, doc_id: str) -> None:
        self.client.delete(self.collection_name, filter=f"{self.spec.doc_id_field} == {quote_string(doc_id)}")

    def stored_doc_ids(self, under: Optional[Path] = None) -> List[str]:
        """Document ids in the collection (those under folder ``under`` when given).

        The prefix test runs in Python: Milvus Lite 2.5.1 does not honour ``\\_`` escapes in prefix LIKE patterns.
        """
        ids = set()
        it = self.client.query_iterator(self.collection_name, batch_size=1000,
                                        filter=f'{self.spec.doc_id_field} != ""',
                                        output_fields=[self.spec.doc_id_field])
        try:
            while True:
                batch = it.next()
                if not batch:
                    break
                ids.update(r[self.spec.doc_id_field] for r in batch)
        finally:
            it.close()
        if under is not None:
            prefix = under.as_posix().rstrip("/") + "/"
            ids = {i for i in ids if i.startswith(prefix)}
        return sorted(ids)

    # -- pipeline ---------------------------------------------------------------------------------------------
    def _chunks(self, path: Path, doc_id: str, content_hash: str) -> List[BaseNode]:
        docs = read_file(path)
        if not any(d.text.strip() for d in docs):
            raise UnsupportedFile("empty file: no text to index")
        stat = path.stat()
        for d in docs:
            d.metadata.update({"file_path": doc_id, "file_name": path.name, "content_hash": content_hash,
                               "last_modified": int(stat.st_mtime)})
            d.id_ = doc_id
            # chunks are embedded without metadata (MetadataMode.NONE): the splitter must not count it, or a long
            # path fails a small --chunk-size ("Metadata length (140) is longer than chunk size (128)")
            d.excluded_llm_metadata_keys = list(d.metadata)
            d.excluded_embed_metadata_keys = list(d.metadata)
        nodes = self.splitter.get_nodes_from_documents(docs)
        for i, n in enumerate(nodes):
            n.excluded_llm_metadata_keys = list(HIDDEN_METADATA_KEYS)
            n.excluded_embed_metadata_keys = list(HIDDEN_METADATA_KEYS)
            n.id_ = chunk_id(doc_id, content_hash, i)
            n.metadata["chunk"] = i
            n.metadata["chunk_count"] = len(nodes)
        return nodes

    def _embed(self, texts: List[str]) -> Optional[List[List[float]]]:
        """Vectors of ``texts`` in the model's batch size; ``None`` when a stop was requested in between."""
        step = getattr(self.embed_model, "embed_batch_size", len(texts))
        vectors: List[List[float]] = []
        for i in range(0, len(texts), step):
            if self._stop.requested:
                return None
            vectors.extend(self.embed_model.get_text_embedding_batch(texts[i : i + step]))
        return vectors

    def _flush(self, pending: List[BaseNode], report: IngestReport) -> bool:
        """Embed and insert ``pending``; False (nothing inserted) when a stop was requested meanwhile."""
        if not pending:
            return True
        t0 = time.perf_counter()
        texts = [n.get_content(metadata_mode=MetadataMode.NONE) for n in pending]
        window, over = count_over_window(self.embed_model, texts)
        report.embed_window, report.over_window = window, report.over_window + over
        vectors: Dict[str, List[List[float]]] = {}
        for name, batch_texts in [(self.spec.dense_fields[0], texts),
                                  *[(name, [fn(n) for n in pending]) for name, fn in self.field_texts.items()]]:
            embedded = self._embed(batch_texts)
            if embedded is None:
                return False
            vectors[name] = embedded
        t1 = time.perf_counter()
        rows = []
        for i, n in enumerate(pending):
            row = {self.spec.primary_field: n.node_id, self.spec.doc_id_field: n.ref_doc_id,
                   self.spec.text_field: texts[i], self.spec.metadata_field: dict(n.metadata)}
            row.update({name: vecs[i] for name, vecs in vectors.items()}, **llamaindex_fields(n))
            rows.append(row)
        self._wait_insert(report)
        self._inserting = self._inserter.submit(self._insert, rows)  # old chunks were deleted before
        report.embed_seconds += t1 - t0
        report.chunks += len(pending)
        pending.clear()
        return True

    def _insert(self, rows: List[Dict[str, Any]]) -> float:
        t = time.perf_counter()
        self.client.insert(self.collection_name, rows)
        return time.perf_counter() - t

    def _wait_insert(self, report: IngestReport) -> None:
        """Wait for the batch being inserted (its error surfaces here) and count its time."""
        if self._inserting is not None:
            inserting, self._inserting = self._inserting, None
            report.insert_seconds += inserting.result()

    @dispatcher.span
    def run(self, paths: Union[str, Path, Sequence[Union[str, Path]]], *, delete_missing: bool = False,
            recursive: bool = True) -> IngestReport:
        """Ingest ``paths`` (files and/or folders); see the module docstring for the rules."""
        start = time.perf_counter()
        files, folders = collect_files(paths, recursive=recursive)
        report = IngestReport(collection_name=self.collection_name)
        pending: List[BaseNode] = []
        progress = make_progress(len(files), show_bar=self.show_progress, lines_every=self.progress_every,
                                 stream=self.progress_stream)
        self._stop = StopRequest()
        with stop_on_sigint(self._stop):
            unstored = self._ingest_files(files, report, pending, progress)
        self._wait_insert(report)  # also after a stop: what was submitted is stored before the report says so
        progress.close()
        if unstored is not None:
            self._interrupted(report, unstored, files)
        _warn_window(self.embed_model, report)
        if delete_missing:
            present = {f.as_posix() for f in files}
            for folder in folders:
                for doc_id in self.stored_doc_ids(folder):
                    if doc_id not in present and not Path(doc_id).exists():
                        self.delete_document(doc_id)
                        report.deleted.append(doc_id)
        report.total_seconds = time.perf_counter() - start
        logger.info("%s", report)
        return report

    def _ingest_files(self, files: List[Path], report: IngestReport, pending: List[BaseNode], progress: Any
                      ) -> Optional[List[BaseNode]]:
        """Read, split, embed and insert ``files``; the nodes left unstored when a stop was requested, else None."""
        stored_hashes: Dict[str, Optional[str]] = {}
        for i, path in enumerate(files):
            if self._stop.requested:
                return list(pending)
            doc_id = path.as_posix()
            if i % LOOKUP_WINDOW == 0:  # change detection for the next window of files in one query
                stored_hashes = self._stored_hashes([f.as_posix() for f in files[i : i + LOOKUP_WINDOW]])
            try:
                digest = file_hash(path)
                stored = stored_hashes[doc_id]
                if stored == digest:
                    report.unchanged.append(doc_id)
                    continue
                nodes = self._chunks(path, doc_id, digest)
            except UnsupportedFile as exc:
                report.unsupported.append((doc_id, str(exc)))
                logger.info("unsupported %s: %s", doc_id, exc)
                continue
            except (OSError, ValueError) as exc:
                report.failed.append((doc_id, f"{type(exc).__name__}: {exc}"))
                logger.warning("failed %s: %s", doc_id, exc)
                continue
            finally:
                progress.file_read()
            if stored is not None:
                self.delete_document(doc_id)
                report.updated.append(doc_id)
            else:
                report.added.append(doc_id)
            pending.extend(nodes)
            while len(pending) >= self.batch_size:
                head, rest = pending[: self.batch_size], pending[self.batch_size :]
                if not self._flush(head, report):
                    return head + rest
                pending[:] = rest
                progress.chunks_stored(self.batch_size)
        last = len(pending)
        if self._stop.requested or not self._flush(pending, report):
            return list(pending)
        progress.chunks_stored(last)
        return None

    def _interrupted(self, report: IngestReport, unstored: List[BaseNode], files: List[Path]) -> None:
        """Fill in what an interrupted run kept and raise :class:`IngestInterrupted`."""
        partial = {n.ref_doc_id for n in unstored}
        report.added = [d for d in report.added if d not in partial]
        report.updated = [d for d in report.updated if d not in partial]
        report.incomplete = sorted(partial)
        seen = {*report.added, *report.updated, *report.unchanged, *partial,
                *(p for p, _ in report.unsupported), *(p for p, _ in report.failed)}
        report.not_reached = sum(1 for f in files if f.as_posix() not in seen)
        report.interrupted = True
        logger.warning("%s", report)
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
    dense_index, extra_dense_fields, show_progress, progress_every, progress_stream); unknown names are rejected.
    """
    accepted = {"chunk_size", "chunk_overlap", "batch_size", "dim", "analyzer", "dense_index",
                "extra_dense_fields", "show_progress", "progress_every", "progress_stream"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ArgumentTypeError(f"unknown ingest option(s) {unknown}; accepted: {sorted(accepted)}")
    ingestor = Ingestor.from_defaults(collection_name=collection_name, embed_model=embed_model, client=client,
                                      target=target, **options)
    return ingestor.run(paths, delete_missing=delete_missing, recursive=recursive)
