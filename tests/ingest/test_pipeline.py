import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from llama_index_convrag.ingest.pipeline import Ingestor, chunk_id, collect_files, ingest
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever
from tests.conftest import cosine
from tests.fakes import EmbeddingWrapper

LONG = " ".join(f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(24))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "long.txt").write_text(LONG)
    (root / "sub" / "notes.md").write_text("# Milvus notes\n\nMilvus supports BM25 full text search.")
    (root / "page.html").write_text("<html><head><title>Cats</title><script>var hidden = 1;</script></head>"
                                    "<body><p>Cats &amp; kittens purr.</p></body></html>")
    (root / "photo.png").write_bytes(b"\x89PNG")
    (root / "report.pdf").write_bytes(b"%PDF-1.4")
    (root / ".hidden.txt").write_text("never ingested")
    return root


def run(docs: Path, client: Any, name: str, model: Any, **kw: Any):
    return ingest([docs], client=client, collection_name=name, embed_model=model, chunk_size=64,
                  chunk_overlap=8, batch_size=4, **kw)


def rows(client: Any, name: str) -> list:
    return client.query(name, filter='id != ""', output_fields=["doc_id", "text", "metadata"])


def test_ingest_then_reingest_is_idempotent_and_reports_unsupported(docs, milvus_client, collection_name, embed_model):
    first = run(docs, milvus_client, collection_name, embed_model)
    names = sorted(Path(p).name for p in first.added)
    assert names == ["long.txt", "notes.md", "page.html"]
    unsupported = {Path(p).name: reason for p, reason in first.unsupported}
    assert set(unsupported) == {"photo.png"}
    assert "no reader for '.png'" in unsupported["photo.png"]
    failed = {Path(p).name: reason for p, reason in first.failed}
    assert set(failed) == {"report.pdf"}
    assert failed["report.pdf"].startswith("FileParseError: cannot parse 'report.pdf'")
    stored = rows(milvus_client, collection_name)
    assert first.chunks == len(stored) > 3
    long_chunks = [r for r in stored if r["doc_id"].endswith("long.txt")]
    assert len(long_chunks) > 1 and all(r["metadata"]["content_hash"] == long_chunks[0]["metadata"]["content_hash"]
                                        for r in long_chunks)
    html = next(r for r in stored if r["doc_id"].endswith("page.html"))
    assert html["text"] == "Cats & kittens purr." and html["metadata"]["title"] == "Cats"
    for r in milvus_client.query(collection_name, filter='id != ""', output_fields=["doc_id", "metadata"]):
        assert r["id"] == chunk_id(r["doc_id"], r["metadata"]["content_hash"], r["metadata"]["chunk"])
    # a chunk's previous / next links name its neighbours' ids (not the splitter's random ones): rows are reproducible
    by_chunk = {r["metadata"]["chunk"]: r for r in milvus_client.query(
        collection_name, filter=f'doc_id == "{long_chunks[0]["doc_id"]}"', output_fields=["metadata", "_node_content"])}
    links = json.loads(by_chunk[1]["_node_content"])["relationships"]
    assert (links["2"]["node_id"], links["3"]["node_id"]) == (by_chunk[0]["id"], by_chunk[2]["id"])
    json.loads(first.to_json())
    assert "3 added" in str(first) and "1 unsupported" in str(first) and "1 failed" in str(first)

    again = run(docs, milvus_client, collection_name, embed_model)
    assert again.added == [] and again.updated == [] and len(again.unchanged) == 3 and again.chunks == 0
    assert len(rows(milvus_client, collection_name)) == len(stored)

    # an interrupted run left long.txt with a missing chunk: it is re-ingested, not skipped
    milvus_client.delete(collection_name, ids=[long_chunks[-1]["id"]])
    repaired = run(docs, milvus_client, collection_name, embed_model)
    assert [Path(p).name for p in repaired.updated] == ["long.txt"] and len(repaired.unchanged) == 2
    assert len(rows(milvus_client, collection_name)) == len(stored)


def test_changed_file_replaces_its_chunks_and_missing_files_are_deleted(docs, milvus_client, collection_name,
                                                                        embed_model):
    run(docs, milvus_client, collection_name, embed_model)
    (docs / "long.txt").write_text("Now a single short sentence about giraffes.")
    (docs / "sub" / "notes.md").unlink()
    second = run(docs, milvus_client, collection_name, embed_model, delete_missing=True)
    assert [Path(p).name for p in second.updated] == ["long.txt"]
    assert [Path(p).name for p in second.deleted] == ["notes.md"]
    stored = rows(milvus_client, collection_name)
    assert sorted(Path(r["doc_id"]).name for r in stored) == ["long.txt", "page.html"]
    r = MilvusHybridRetriever.from_defaults(collection_name=collection_name, embed_model=embed_model,
                                            client=milvus_client, search_type="sparse", similarity_top_k=1)
    hit = r.retrieve("giraffes")[0]
    assert hit.node.text == "Now a single short sentence about giraffes."
    assert hit.node.ref_doc_id == (docs / "long.txt").resolve().as_posix()


class QueryCounter:
    """The real Milvus Lite client, counting the ``query`` calls that the change detection makes."""

    def __init__(self, client: Any) -> None:
        self.client, self.queries = client, 0

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        return self.client.query(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_change_detection_asks_once_per_window_of_files(tmp_path, milvus_client, collection_name, embed_model,
                                                        monkeypatch):
    from llama_index_convrag.ingest import changes

    monkeypatch.setattr(changes, "LOOKUP_WINDOW", 4)
    root = tmp_path / "many"
    root.mkdir()
    for i in range(10):
        (root / f"f{i:02d}.txt").write_text(f"File {i} is about topic {i}.")
    first = run(root, milvus_client, collection_name, embed_model)
    assert len(first.added) == 10 and first.chunks == 10
    (root / "f01.txt").write_text("File 1 now talks about giraffes.")  # first window
    (root / "f09.txt").write_text("File 9 now talks about zebras.")  # third window
    counted = QueryCounter(milvus_client)
    again = run(root, counted, collection_name, embed_model)
    assert sorted(Path(p).name for p in again.updated) == ["f01.txt", "f09.txt"] and len(again.unchanged) == 8
    assert counted.queries == 3  # ceil(10 / 4) lookups, not one or two per file
    assert sorted(Path(r["doc_id"]).name for r in rows(milvus_client, collection_name)) == \
        [f"f{i:02d}.txt" for i in range(10)]


def test_documents_past_the_query_limit_are_counted_by_milvus(tmp_path, milvus_client, collection_name,
                                                               embed_model, monkeypatch):
    from llama_index_convrag.ingest import changes

    monkeypatch.setattr(changes, "QUERY_LIMIT", 3)  # long.txt alone has more chunks than one query returns
    root = tmp_path / "limit"
    root.mkdir()
    (root / "long.txt").write_text(LONG)
    (root / "a.txt").write_text("A short note about apples.")
    first = run(root, milvus_client, collection_name, embed_model)
    long_chunks = [r for r in rows(milvus_client, collection_name) if r["doc_id"].endswith("long.txt")]
    assert len(first.added) == 2 and len(long_chunks) > 3
    again = run(root, milvus_client, collection_name, embed_model)
    assert again.added == [] and again.updated == [] and len(again.unchanged) == 2
    milvus_client.delete(collection_name, ids=[long_chunks[-1]["id"]])  # an interrupted run's missing chunk
    repaired = run(root, milvus_client, collection_name, embed_model)
    assert [Path(p).name for p in repaired.updated] == ["long.txt"] and len(repaired.unchanged) == 1
    assert len([r for r in rows(milvus_client, collection_name) if r["doc_id"].endswith("long.txt")]) == \
        len(long_chunks)


def test_collect_files_and_errors(docs, tmp_path):
    files, folders = collect_files([docs, docs / "long.txt"])
    assert folders == [docs.resolve()] and ".hidden.txt" not in {f.name for f in files}
    assert len(files) == len(set(files)) == 5
    with pytest.raises(FileNotFoundError, match="no such file or folder: .*missing"):
        collect_files([tmp_path / "missing"])


def test_unknown_options_and_foreign_layouts_are_rejected(docs, milvus_client, collection_name, embed_model):
    with pytest.raises(TypeError, match=r"unknown ingest option\(s\) \['chunksize'\]; accepted: "):
        ingest([docs], client=milvus_client, collection_name=collection_name, embed_model=embed_model, chunksize=3)
    with pytest.raises(ValueError, match="give a MilvusClient"):
        Ingestor.from_defaults(collection_name=collection_name, embed_model=embed_model)


def test_extra_dense_field_is_filled_and_searchable(tmp_path, milvus_client, collection_name, embed_model):
    (tmp_path / "a.md").write_text("# Sourdough baking\n\nFlour, water and salt.")
    (tmp_path / "b.md").write_text("# Orbital mechanics\n\nKepler's laws describe ellipses.")
    rep = ingest([tmp_path], client=milvus_client, collection_name=collection_name, embed_model=embed_model,
                 extra_dense_fields={"title_embedding": lambda node: node.metadata["title"]})
    assert rep.chunks == 2
    r = MilvusHybridRetriever.from_defaults(
        collection_name=collection_name, client=milvus_client, embed_model=embed_model, search_type="hybrid",
        search_fields=["embedding", "title_embedding", "sparse_embedding"], ranker_type="weighted",
        ranker_params={"weights": [0.0, 1.0, 0.0]}, similarity_top_k=2, explain=True)
    got = r.retrieve("bread")
    assert got[0].node.metadata["title"] == "Sourdough baking"
    stages = [s["stage"] for s in got[0].node.metadata["convrag_rank_trail"]]
    assert "dense:title_embedding" in stages and stages[-1] == "fusion:weighted"
    with pytest.raises(ValueError, match=r"field_texts must give a text function for each extra dense field \['title_embedding'\]"):
        Ingestor.from_defaults(collection_name=collection_name, client=milvus_client, embed_model=embed_model)


def test_chunks_past_the_models_window_are_counted_and_warned(tmp_path, milvus_client, collection_name, embed_model,
                                                              caplog):
    """A chunk size past the window is the user's choice, and counted: the window is read from the model."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "long.txt").write_text(LONG)  # ~400 word pieces in one 700-token chunk
    (tmp_path / "d" / "short.txt").write_text("Milvus supports BM25 full text search.")
    window = embed_model.max_input_tokens
    counts = embed_model.count_tokens([LONG, "Milvus supports BM25 full text search."])
    assert counts[0] > window >= counts[1]
    with caplog.at_level("WARNING", logger="llama_index_convrag.ingest.pipeline"):
        report = ingest([tmp_path / "d"], client=milvus_client, collection_name=collection_name,
                        embed_model=embed_model, chunk_size=700)
    assert (report.chunks, report.embed_window, report.over_window) == (2, window, 1)
    assert f"1 of 2 chunks exceed LocalMiniLMEmbedding's window of {window} tokens" in caplog.text
    assert f"1 of 2 chunks exceed the embedding model's window of {window} tokens" in str(report)


def test_a_model_without_a_stated_window_is_warned_about(tmp_path, milvus_client, collection_name, caplog):
    from llama_index.core.embeddings import MockEmbedding

    (tmp_path / "a.txt").write_text("a short text")
    with caplog.at_level("WARNING", logger="llama_index_convrag.ingest.pipeline"):
        report = ingest([tmp_path / "a.txt"], client=milvus_client, collection_name=collection_name,
                        embed_model=MockEmbedding(embed_dim=8))
    assert report.chunks == 1 and report.embed_window is None and report.over_window == 0
    assert "MockEmbedding does not state its input window (max_input_tokens)" in caplog.text


# --- interruption and progress ---------------------------------------------------------------------------------
def _pending_stop() -> Any:
    """The StopRequest that the installed SIGINT handler (``progress.stop_on_sigint``) sets, if one is installed."""
    from llama_index_convrag.ingest.progress import StopRequest

    handler = signal.getsignal(signal.SIGINT)
    for cell in getattr(handler, "__closure__", None) or ():
        if isinstance(cell.cell_contents, StopRequest):
            return cell.cell_contents
    return None


class SigintAtCall(EmbeddingWrapper):
    """Sends SIGINT to this process during the N-th embedding call of the real model (as Ctrl-C would), then waits
    until the handler has run (it runs on the main thread; this call may run on an embedding thread)."""

    def __init__(self, model: Any, at_call: int) -> None:
        super().__init__(model)
        self.at_call, self.calls = at_call, 0
        self._lock = threading.Lock()

    def get_text_embedding_batch(self, texts: list, **kw: Any) -> list:
        with self._lock:
            self.calls += 1
            call = self.calls
        vectors = super().get_text_embedding_batch(texts)
        if call == self.at_call:
            stop = _pending_stop()
            os.kill(os.getpid(), signal.SIGINT)
            deadline = time.monotonic() + 60
            while stop is not None and not stop.requested and time.monotonic() < deadline:
                time.sleep(0.01)
        return vectors


@pytest.mark.parametrize("at_call, concurrency", [(1, 1), (3, 1), (1, 3), (3, 3)])
def test_sigint_stops_at_the_next_sub_batch_and_rerun_resumes(docs, milvus_client, collection_name, embed_model,
                                                              at_call, concurrency, caplog):
    from llama_index_convrag.ingest.progress import IngestInterrupted

    interrupting = SigintAtCall(embed_model, at_call)
    with caplog.at_level("WARNING"), pytest.raises(IngestInterrupted) as info:
        run(docs, milvus_client, collection_name, interrupting, embed_concurrency=concurrency)
    assert "interrupted" not in caplog.text  # the caller prints the report it gets: a warning would say it twice
    # no embedding call starts after the signal; calls already under way on other threads finish
    assert at_call <= interrupting.calls <= at_call + concurrency - 1
    report = info.value.report
    assert report.interrupted and report.chunks == len(rows(milvus_client, collection_name))
    stored = Counter(r["doc_id"] for r in rows(milvus_client, collection_name))
    # the summary is true: partly stored = some chunks stored, not all; the others read count as not stored
    assert report.incomplete == sorted(d for d, n in stored.items() if d not in report.added)
    assert not set(report.incomplete) & set(report.added)
    assert all(stored[d] == next(r for r in rows(milvus_client, collection_name) if r["doc_id"] == d)["metadata"][
        "chunk_count"] for d in report.added)
    assert "re-run the same command to resume" in str(report) and f"interrupted after {report.total_seconds:.1f} s" \
        in str(report) and report.total_seconds > 0
    assert report.not_reached + len(report.incomplete) + len(report.added) + len(report.unsupported) \
        + len(report.failed) == 5

    resumed = run(docs, milvus_client, collection_name, embed_model)
    assert sorted(resumed.unchanged) == sorted(report.added)
    assert set(report.incomplete) <= set(resumed.added) | set(resumed.updated)
    stored_rows = rows(milvus_client, collection_name)
    assert len(stored_rows) == len({r["id"] for r in stored_rows}) == resumed.chunks + sum(
        1 for r in stored_rows if r["doc_id"] in report.added)
    for doc_id in {r["doc_id"] for r in stored_rows}:
        chunks = [r for r in stored_rows if r["doc_id"] == doc_id]
        assert len(chunks) == chunks[0]["metadata"]["chunk_count"]


def test_progress_lines_count_files_and_chunks(docs, milvus_client, collection_name, embed_model):
    import io

    stream = io.StringIO()
    report = run(docs, milvus_client, collection_name, embed_model, progress_every=1e-9, progress_stream=stream)
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith(f"ingest: 5/5 files read, {report.chunks} chunks stored (")


# --- the overlapped stages store what the sequential path stores -----------------------------------------------
def all_rows(client: Any, name: str) -> dict:
    got = client.query(name, filter='id != ""', output_fields=["*"], limit=16384)
    return {r["id"]: {k: v for k, v in r.items() if k != "sparse_embedding"} for r in got}


def test_concurrent_embedding_and_reader_processes_store_the_same_rows_as_the_sequential_path(
        tmp_path, milvus_client, collection_name, openai_server, embed_model):
    """Against the OpenAI-compatible server (real HTTP, the real model behind it): 4 requests in flight and 2 reader
    processes store exactly the rows of one request at a time read in this thread; a changed file, a vanished one,
    unsupported and failed files are reported alike."""
    from llama_index.embeddings.openai import OpenAIEmbedding

    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    for i in range(30):
        text = " ".join(f"File {i} sentence {j} is about topic {(i + j) % 9} and more words." for j in range(i % 7 + 1))
        (root / ("sub" if i % 3 else ".") / f"f{i:02d}.txt").write_text(text)
    (root / "gone.md").write_text("# Gone\n\nThis file will vanish before the second run.")
    (root / "photo.png").write_bytes(b"\x89PNG")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4")
    model = OpenAIEmbedding(model_name="text-embedding-3-small", api_key="x", api_base=openai_server.base_url,
                            embed_batch_size=5)
    names = {"seq": collection_name, "par": collection_name + "_par"}
    settings = {"seq": {"embed_concurrency": 1, "read_workers": 0}, "par": {"embed_concurrency": 4, "read_workers": 2}}
    try:
        def both(**kw: Any) -> dict:
            return {k: ingest([root], client=milvus_client, collection_name=names[k], embed_model=model,
                              chunk_size=32, chunk_overlap=4, batch_size=7, **settings[k], **kw) for k in names}

        first = both()
        (root / "sub" / "f01.txt").write_text("File 1 now talks about giraffes only.")
        (root / "gone.md").unlink()
        second = both(delete_missing=True)
        for reports in (first, second):
            seq, par = (reports[k].to_dict() for k in ("seq", "par"))
            for key in ("added", "updated", "unchanged", "deleted", "unsupported", "failed", "chunks", "over_window"):
                assert seq[key] == par[key], key
        assert first["par"].chunks > 40 and len(first["par"].added) == 31
        assert [Path(p).name for p in second["par"].updated] == ["f01.txt"]
        assert [Path(p).name for p in second["par"].deleted] == ["gone.md"]
        seq_rows, par_rows = (all_rows(milvus_client, names[k]) for k in ("seq", "par"))
        assert seq_rows == par_rows  # ids, document ids, text, metadata, LlamaIndex's node fields, vectors
        # and each vector is the model's vector of its own text (no batch got another batch's vectors)
        sample = sorted(par_rows)[:: max(1, len(par_rows) // 12)]
        expected = embed_model.embed([par_rows[i]["text"] for i in sample])
        for i, vec in zip(sample, expected):
            assert cosine(par_rows[i]["embedding"], vec) > 0.9999
    finally:
        if milvus_client.has_collection(names["par"]):
            milvus_client.drop_collection(names["par"])


def test_vectors_of_another_variant_are_refused_at_ingest_and_at_retrieval(docs, milvus_client, collection_name,
                                                                          embed_model):
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
    from llama_index_convrag.indices import ConvRAGIndex

    run(docs, milvus_client, collection_name, embed_model)
    other = LocalMiniLMEmbedding(variant="int8" if embed_model.variant == "fp32" else "fp32")
    both = rf"holds vectors of '{embed_model.embed_model_id}'; this embedding model is '{other.embed_model_id}'"
    with pytest.raises(ValueError, match=both):
        run(docs, milvus_client, collection_name, other)
    with pytest.raises(ValueError, match=both):
        ConvRAGIndex.from_collection(collection_name, embed_model=other, client=milvus_client)
    with pytest.raises(ValueError, match=both):
        MilvusHybridRetriever.from_defaults(collection_name=collection_name, embed_model=other, client=milvus_client)
    assert run(docs, milvus_client, collection_name, embed_model).chunks == 0  # the writer's own model goes on
