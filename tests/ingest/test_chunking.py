"""Chunks sized to the embedding model's window, counted in its own tokens (ingest/chunking.py)."""

import pickle
from pathlib import Path

import pytest
from llama_index.core.embeddings import MockEmbedding

from llama_index_convrag.ingest.chunking import (DEFAULT_CHUNK_OVERLAP, FALLBACK_CHUNK_SIZE, ContentTokens, build_splitter,
                                                 default_overlap, model_tokenizer, window_chunk_size)
from llama_index_convrag.ingest.pipeline import ingest

LONG = " ".join(f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(24))


def test_the_default_chunk_is_the_models_window_less_its_special_tokens(embed_model):
    assert window_chunk_size(embed_model) == embed_model.max_input_tokens - embed_model.special_tokens == 254
    splitter = build_splitter(embed_model)
    assert (splitter.chunk_size, splitter.chunk_overlap) == (254, 254 // 8)
    assert splitter._tokenizer("Milvus stores vectors.") == embed_model.token_spans("Milvus stores vectors.")[0]


def test_overlap_is_an_eighth_of_the_chunk_at_most_50():
    assert [default_overlap(n) for n in (1, 64, 254, 400, 700)] == [0, 8, 31, DEFAULT_CHUNK_OVERLAP, 50]


def test_a_model_without_a_window_or_tokenizer_gets_the_fallback_size():
    model = MockEmbedding(embed_dim=8)
    assert window_chunk_size(model) is None and model_tokenizer(model) is None
    splitter = build_splitter(model)
    assert (splitter.chunk_size, splitter.chunk_overlap) == (FALLBACK_CHUNK_SIZE, 50)


class WindowOnly(MockEmbedding):
    """A model that states its window but offers no tokenizer (as a remote embedding API does)."""

    max_input_tokens: int = 128


def test_a_model_with_a_window_but_no_tokenizer_gets_its_window_in_default_tokens():
    splitter = build_splitter(WindowOnly(embed_dim=8))
    assert (splitter.chunk_size, splitter.chunk_overlap) == (128, 16)


def test_a_given_size_counts_the_models_tokens(embed_model):
    chunks = build_splitter(embed_model, chunk_size=40, chunk_overlap=0).split_text(LONG)
    counts = [len(embed_model.token_spans(c)[0]) for c in chunks]
    assert len(chunks) > 5 and max(counts) <= 40 and max(counts) > 30


@pytest.mark.parametrize("size, overlap, message", [
    (0, None, "chunk_size must be >= 1 token, got 0"),
    (64, 64, r"chunk_overlap must be in \[0, 63\] \(chunk size - 1\), got 64"),
    (None, -1, r"chunk_overlap must be in \[0, 253\] \(chunk size - 1\), got -1"),
])
def test_bad_sizes_are_refused_naming_the_value(embed_model, size, overlap, message):
    with pytest.raises(ValueError, match=message):
        build_splitter(embed_model, chunk_size=size, chunk_overlap=overlap)


def test_bad_sizes_are_refused_before_the_collection_is_created(tmp_path: Path, milvus_client, collection_name,
                                                                embed_model):
    (tmp_path / "a.txt").write_text(LONG)
    with pytest.raises(ValueError, match="chunk_overlap must be in"):
        ingest([tmp_path], client=milvus_client, collection_name=collection_name, embed_model=embed_model,
               chunk_size=32, chunk_overlap=32)
    assert not milvus_client.has_collection(collection_name)


def test_default_ingest_embeds_no_chunk_past_the_window(shared_data: Path, tmp_path: Path, milvus_client,
                                                       collection_name, embed_model):
    essay = shared_data / "paul_graham" / "paul_graham_essay.txt"
    report = ingest([essay], client=milvus_client, collection_name=collection_name, embed_model=embed_model)
    assert report.chunks > 60 and (report.embed_window, report.over_window) == (256, 0)
    rows = milvus_client.query(collection_name, filter='id != ""', output_fields=["text"], limit=1000)
    counts = embed_model.count_tokens([r["text"] for r in rows])
    assert len(rows) == report.chunks and max(counts) <= embed_model.max_input_tokens
    assert sorted(counts)[len(counts) // 2] > 200  # chunks fill the window, not a fraction of it


def test_metadata_is_not_counted_and_nothing_is_printed(embed_model, capsys):
    from llama_index.core import Document

    doc = Document(text=LONG, metadata={"file_path": "/a/very/long/path/" * 30})
    nodes = build_splitter(embed_model, chunk_size=16).get_nodes_from_documents([doc])
    assert len(nodes) > 10 and all(n.metadata == doc.metadata for n in nodes)
    assert capsys.readouterr() == ("", "")


def test_a_pickled_splitter_still_counts_in_the_models_tokens(embed_model):
    # reader processes and Ray workers receive the splitter pickled; LlamaIndex rebuilds components from their fields
    splitter = build_splitter(embed_model)
    text = " ".join(f"word{i} antidisestablishmentarianism" for i in range(400))
    copy = pickle.loads(pickle.dumps(splitter))
    assert isinstance(copy._tokenizer, ContentTokens)
    assert copy.split_text(text) == splitter.split_text(text)
