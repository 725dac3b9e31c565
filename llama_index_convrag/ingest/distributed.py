"""Ingest past one machine: Ray Data reads, splits, embeds and writes to a Milvus server from many processes.

* An optional extra: ``pip install "llama-index-convrag[distributed]"``. Ray is imported when a run starts; without it
  the run raises :class:`~llama_index_convrag.errors.ConfigurationError` naming the extra.
* This process (the driver) lists the files, creates the collection if missing (our layout, through
  :meth:`~llama_index_convrag.ingest.pipeline.Ingestor.from_defaults`, whose splitter the workers receive) and, when
  asked, removes the documents of vanished files at the end. It joins the Ray cluster named by ``RAY_ADDRESS``, or
  starts one on this machine when none is running.
* Ray Data streams the files through two stages of up to ``workers`` tasks each. **read** (:func:`read_files`): per
  window of files, the stored hashes in one query, then :func:`~llama_index_convrag.ingest.prepare.prepare_file`
  (unchanged files are skipped; a replaced document's old chunks are deleted before its new chunks leave the
  stage). **embed and write** (:func:`embed_and_write`): the model ``embed_factory`` builds, once per worker
  process (the local model or an embedding server's client), embeds a batch, and the batch is upserted (a batch
  that Ray retries after a worker failure does not duplicate rows).
* Every Milvus call of a task has a deadline (:class:`WorkerDeadlines`, pymilvus's own retries included); a call
  that runs out of time is made once more on a new connection, then the task fails with
  :class:`~llama_index_convrag.errors.MilvusConnectionError` naming the server, the call and the deadline.
* Chunk ids, texts, metadata and vectors are the ones :mod:`~llama_index_convrag.ingest.pipeline` stores, so the
  two engines can take turns on one collection: a re-run of either skips the files the other stored.
* The workers are separate processes, on other machines in a real cluster: the target must be a Milvus server (a
  Milvus Lite file opens in one process only), and the files must have the same paths on every node.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, TypeVar, Union

import grpc
import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.node_parser import NodeParser

from llama_index_convrag.errors import ConfigurationError, MilvusConnectionError
from llama_index_convrag.ingest import changes
from llama_index_convrag.ingest.embed_stage import embed_texts
from llama_index_convrag.ingest.limits import computes_in_process
from llama_index_convrag.ingest.pipeline import DEFAULT_BATCH_SIZE, Ingestor, collect_files
from llama_index_convrag.ingest.prepare import prepare_file
from llama_index_convrag.ingest.progress import StopRequest
from llama_index_convrag.ingest.read_stage import load_splitter, pickle_splitter
from llama_index_convrag.ingest.report import IngestReport
from llama_index_convrag.ingest.writer import delete_document
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus, reconnect_milvus
from llama_index_convrag.milvus.schema import CollectionSpec

DISTRIBUTED_EXTRA_HINT = 'pip install "llama-index-convrag[distributed]"'
#: CPUs Ray reserves for one read task and one embed-and-write task (an embedding server's client waits on the
#: network; the local model computes, so its tasks reserve a whole CPU each).
READ_CPUS = 0.25
CLIENT_EMBED_CPUS = 0.25
LOCAL_EMBED_CPUS = 1.0
#: Columns of the rows between the stages; a row is a file's outcome or one chunk.
OUTCOME_COLUMNS = ("doc_id", "outcome", "reason", "expected")
#: gRPC codes of a call that ran out of time or lost its connection: the ones a new connection may cure.
RETRIED_CODES = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
T = TypeVar("T")


@dataclass(frozen=True)
class WorkerDeadlines:
    """Seconds a Ray task's Milvus calls may take, and how many times a call that runs out of time is made (each
    retry on a new connection)."""

    #: Connecting: three times pymilvus's 10 s default, for a worker sharing a loaded machine with its server.
    connect_s: float = 30.0
    #: One query, delete or upsert, pymilvus's retries included: the Ray test's first test (three ingests, every
    #: call of them) took 23 s at load 14 on 2 cores, so one call past a minute is stuck, not slow.
    call_s: float = 60.0
    #: The first attempt and one retry on a new connection.
    attempts: int = 2

    def __post_init__(self) -> None:
        if not (self.connect_s > 0 and self.call_s > 0):
            raise ConfigurationError(f"WorkerDeadlines connect_s and call_s must be > 0 seconds, got "
                                     f"{self.connect_s!r} and {self.call_s!r}")
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ConfigurationError(f"WorkerDeadlines attempts must be an integer >= 1, got {self.attempts!r}")


def import_ray() -> Any:
    """``ray`` with Ray Data loaded, or a ConfigurationError naming the extra."""
    try:
        import ray
        import ray.data  # noqa: F401 - the Data library is what the engine needs
    except ImportError as exc:
        raise ConfigurationError(f"the Ray engine needs Ray Data ({exc}); install it with {DISTRIBUTED_EXTRA_HINT}"
                                 ) from exc
    return ray


@dataclass(frozen=True)
class _Job:
    """What every task needs, picklable: where to write, how to split, how to build the model (``model_key``
    names the factory, so that a worker process builds each model once and reuses it in later runs)."""

    target: MilvusTarget
    collection_name: str
    spec: CollectionSpec
    splitter: bytes
    embed_factory: Callable[[], BaseEmbedding]
    model_key: str
    deadlines: WorkerDeadlines = WorkerDeadlines()


#: Per worker process: splitters and models by key. Ray reuses its worker processes across tasks and runs, so
#: imports, the model's load and the Milvus connection (cached by ``connect_milvus``) are paid once per process.
_SPLITTERS: Dict[str, NodeParser] = {}
_MODELS: Dict[str, BaseEmbedding] = {}


def _splitter(job: _Job) -> NodeParser:
    key = hashlib.sha1(job.splitter).hexdigest()
    if key not in _SPLITTERS:
        _SPLITTERS[key] = load_splitter(job.splitter)
    return _SPLITTERS[key]


def _model(job: _Job) -> BaseEmbedding:
    if job.model_key not in _MODELS:
        _MODELS[job.model_key] = job.embed_factory()
    return _MODELS[job.model_key]


def _timed_out(exc: BaseException) -> bool:
    """True for a call that ran out of time or lost its connection (pymilvus raises gRPC's error for a deadline
    and its own ``MilvusException`` when its retries run out)."""
    code = exc.code() if isinstance(exc, grpc.RpcError) else getattr(exc, "code", None)
    return code in RETRIED_CODES or "timeout" in str(exc).lower()


def milvus_call(job: _Job, what: str, call: Callable[[Any, float], T]) -> T:
    """``call(client, timeout)`` on this process' client of ``job.target`` under ``job.deadlines``: a call that runs
    out of time (or cannot connect) is made again on a new connection, up to ``attempts`` times in all; then
    :class:`MilvusConnectionError` naming the server, ``what`` and the deadline. Other errors pass through."""
    deadlines: WorkerDeadlines = job.deadlines
    last: Optional[BaseException] = None
    for attempt in range(deadlines.attempts):
        try:
            client = (connect_milvus(job.target, timeout=deadlines.connect_s) if attempt == 0
                      else reconnect_milvus(job.target, timeout=deadlines.connect_s))
            return call(client, deadlines.call_s)
        except MilvusConnectionError as exc:
            last = exc
        except Exception as exc:  # noqa: BLE001 - pymilvus raises gRPC's errors and its own; others re-raised
            if not _timed_out(exc):
                raise
            last = exc
    said = str(last).strip().splitlines()[0][:300] if last is not None and str(last).strip() else type(last).__name__
    raise MilvusConnectionError(
        f"Milvus at {job.target.uri!r} did not answer {what} on collection {job.collection_name!r} within "
        f"{deadlines.call_s:g} s (connecting within {deadlines.connect_s:g} s) in {deadlines.attempts} attempt(s), "
        f"each retry on a new connection; last error: {said}") from last


def read_files(batch: Mapping[str, np.ndarray], job: _Job) -> Dict[str, np.ndarray]:
    """Read stage: a window of paths -> one outcome row per file and one row per chunk of the files to store."""
    splitter, paths = _splitter(job), [Path(p) for p in batch["path"]]
    doc_ids = [p.as_posix() for p in paths]
    stored = milvus_call(job, "the stored-hash query", lambda client, timeout: changes.stored_hashes(
        client, job.collection_name, job.spec, doc_ids, timeout=timeout))
    out: Dict[str, List[Any]] = {k: [] for k in (*OUTCOME_COLUMNS, "text", "row")}
    for path in paths:
        prepared = prepare_file(path, stored[path.as_posix()], splitter, job.spec, keep_nodes=False)
        if prepared.outcome == "updated":
            doc_id = prepared.doc_id
            milvus_call(job, f"the delete of {doc_id!r}", lambda client, timeout: delete_document(
                client, job.collection_name, job.spec, doc_id, timeout=timeout))
        _append(out, prepared.doc_id, prepared.outcome, prepared.reason, len(prepared.chunks), "", "")
        for chunk in prepared.chunks:
            _append(out, prepared.doc_id, "chunk", "", 0, chunk.text, json.dumps(chunk.row))
    return {k: np.array(v, dtype=np.int64 if k == "expected" else object) for k, v in out.items()}


def _append(out: Dict[str, List[Any]], *values: Any) -> None:
    for key, value in zip((*OUTCOME_COLUMNS, "text", "row"), values):
        out[key].append(value)


def embed_and_write(batch: Mapping[str, np.ndarray], job: _Job) -> Dict[str, np.ndarray]:
    """Embed-and-write stage: embeds the chunk rows of a batch and upserts them. Returns the file outcome rows plus,
    per document, the chunks stored (``outcome="stored"``, the count in ``expected``), and the batch's embedding and
    insert seconds on its first row."""
    chunk = np.asarray(batch["outcome"]) == "chunk"
    texts = [str(t) for t in np.asarray(batch["text"])[chunk]]
    t0 = time.perf_counter()
    vectors = embed_texts(_model(job), texts, StopRequest()) if texts else []  # Ray cancels tasks on a stop
    t1 = time.perf_counter()
    rows = [json.loads(r) for r in np.asarray(batch["row"])[chunk]]
    for row, vector in zip(rows, vectors or []):
        row[job.spec.dense_fields[0]] = vector
    if rows:
        milvus_call(job, f"the upsert of {len(rows)} rows", lambda client, timeout: client.upsert(
            job.collection_name, rows, timeout=timeout))
    t2 = time.perf_counter()
    out: Dict[str, List[Any]] = {k: [] for k in OUTCOME_COLUMNS}
    for i in np.flatnonzero(~chunk):
        for key in OUTCOME_COLUMNS:
            out[key].append(batch[key][i])
    for doc_id, n in Counter(str(d) for d in np.asarray(batch["doc_id"])[chunk]).items():
        for key, value in zip(OUTCOME_COLUMNS, (doc_id, "stored", "", n)):
            out[key].append(value)
    n_out = len(out["doc_id"])
    result = {k: np.array(v, dtype=np.int64 if k == "expected" else object) for k, v in out.items()}
    result["embed_s"] = np.array(([t1 - t0] + [0.0] * (n_out - 1)) if n_out else [], dtype=np.float64)
    result["insert_s"] = np.array(([t2 - t1] + [0.0] * (n_out - 1)) if n_out else [], dtype=np.float64)
    return result


def summarize(collection_name: str, files: Sequence[Path], rows: Sequence[Mapping[str, Any]]) -> IngestReport:
    """The report of a run from the rows its last stage returned (in file order; documents whose chunks were not
    all stored are listed as ``incomplete``)."""
    report = IngestReport(collection_name=collection_name)
    outcome: Dict[str, str] = {}
    reason: Dict[str, str] = {}
    expected: Dict[str, int] = {}
    stored: Counter = Counter()
    for row in rows:
        doc_id, kind = str(row["doc_id"]), str(row["outcome"])
        report.embed_seconds += float(row["embed_s"])
        report.insert_seconds += float(row["insert_s"])
        if kind == "stored":
            stored[doc_id] += int(row["expected"])
        else:
            outcome[doc_id], reason[doc_id], expected[doc_id] = kind, str(row["reason"]), int(row["expected"])
    for doc_id in (f.as_posix() for f in files):
        kind = outcome.get(doc_id)
        if kind in ("added", "updated") and stored[doc_id] != expected[doc_id]:
            report.incomplete.append(doc_id)
        elif kind in ("added", "updated", "unchanged"):
            getattr(report, kind).append(doc_id)
        elif kind in ("unsupported", "failed"):
            getattr(report, kind).append((doc_id, reason[doc_id]))
    report.chunks = sum(stored.values())
    return report


def ingest_distributed(
    paths: Union[str, Path, Sequence[Union[str, Path]]],
    *,
    collection_name: str,
    target: MilvusTarget,
    embed_factory: Callable[[], BaseEmbedding],
    workers: int = 2,
    batch_size: int = DEFAULT_BATCH_SIZE,
    delete_missing: bool = False,
    recursive: bool = True,
    show_progress: bool = False,
    deadlines: Optional[WorkerDeadlines] = None,
    **options: Any,
) -> IngestReport:
    """Ingest ``paths`` on Ray Data with ``workers`` actors per stage into the Milvus server at ``target``.

    ``embed_factory`` builds the embedding model in each actor (a class or a ``functools.partial``; it is pickled);
    ``options`` go to :meth:`Ingestor.from_defaults` (chunk_size, chunk_overlap, dim, analyzer, dense_index), which
    the driver uses to create or check the collection and to build the splitter. ``deadlines`` bound the workers'
    Milvus calls (:class:`WorkerDeadlines` when None).
    """
    if target.is_lite:
        raise ConfigurationError(f"the Ray engine writes from several processes and needs a Milvus server URI "
                                 f"(http://HOST:PORT), got the Milvus Lite file {target.uri!r}")
    if workers < 1 or batch_size < 1:
        raise ConfigurationError(f"workers and batch_size must be >= 1, got {workers!r} and {batch_size!r}")
    accepted = {"chunk_size", "chunk_overlap", "dim", "analyzer", "dense_index"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ConfigurationError(f"unknown option(s) {unknown} for the Ray engine; accepted: {sorted(accepted)}")
    ray = import_ray()
    start = time.perf_counter()
    files, folders = collect_files(paths, recursive=recursive)
    model = embed_factory()
    driver = Ingestor.from_defaults(collection_name=collection_name, embed_model=model, target=target,
                                    batch_size=batch_size, **options)
    if len(driver.spec.dense_fields) > 1:
        raise ConfigurationError(f"collection {collection_name!r} has extra dense fields "
                                 f"{list(driver.spec.dense_fields[1:])}; the Ray engine fills only the first")
    job = _Job(target, collection_name, driver.spec, pickle_splitter(driver.splitter), embed_factory,
               hashlib.sha1(ray.cloudpickle.dumps(embed_factory)).hexdigest(),
               WorkerDeadlines() if deadlines is None else deadlines)
    if not ray.is_initialized():
        ray.init(logging_level="WARNING", log_to_driver=False)
    context = ray.data.DataContext.get_current()
    bars, context.enable_progress_bars = context.enable_progress_bars, show_progress
    window = changes.LOOKUP_WINDOW
    try:
        rows = [] if not files else (
            ray.data.from_items([{"path": f.as_posix()} for f in files], override_num_blocks=-(-len(files) // window))
            .map_batches(read_files, fn_kwargs={"job": job}, batch_size=window, batch_format="numpy",
                         compute=ray.data.TaskPoolStrategy(size=workers), num_cpus=READ_CPUS)
            .map_batches(embed_and_write, fn_kwargs={"job": job}, batch_size=batch_size, batch_format="numpy",
                         compute=ray.data.TaskPoolStrategy(size=workers),
                         num_cpus=LOCAL_EMBED_CPUS if computes_in_process(model) else CLIENT_EMBED_CPUS)
            .take_all())
    finally:
        context.enable_progress_bars = bars
    report = summarize(collection_name, files, rows)
    if delete_missing:
        for doc_id in changes.vanished(driver.client, collection_name, driver.spec, files, folders):
            driver.delete_document(doc_id)
            report.deleted.append(doc_id)
    report.total_seconds = time.perf_counter() - start
    return report
