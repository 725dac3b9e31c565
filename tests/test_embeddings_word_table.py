"""The local model's word table: its words, its parts on disk (made now, in the background, or by another process),
and vectors equal to the ones the bridge's word cache computes."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import List

import numpy as np
import pytest
from filelock import FileLock
from llama_index.core.embeddings import MockEmbedding

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.embeddings import word_table
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.embeddings.word_table import (
    WordTable,
    WordTableSource,
    build_word_table,
    unit_rows,
    vocabulary_words,
    word_table_paths,
    word_table_source,
)
from llama_index_convrag.memory.bridge import WordVectors

WORDS = ["seattle", "city", "dog", "puppy", "painting"]


def test_vocabulary_words_are_the_whole_words_in_id_order(embed_model: LocalMiniLMEmbedding) -> None:
    words = vocabulary_words(embed_model.tokenizer_path)
    assert len(words) == 22_501 and len(set(words)) == len(words)
    assert all(w.isalpha() and not w.startswith("##") for w in words)
    assert words.index("the") < words.index("city") < words.index("seattle")
    assert "##s" not in words and "[CLS]" not in words and "2023" not in words


def test_word_table_maps_words_to_rows_and_refuses_a_matrix_of_another_length() -> None:
    table = WordTable([(["a", "b"], np.eye(2, dtype=np.float32)), (["c"], np.ones((1, 2), dtype=np.float32))])
    assert len(table) == 3 and list(table) == ["a", "b", "c"] and "b" in table and "z" not in table
    np.testing.assert_array_equal(table["b"], [0.0, 1.0])
    with pytest.raises(ConfigurationError, match=r"one row per word: 2 words, matrix of shape \(3, 2\)"):
        WordTable([(["a", "b"], np.zeros((3, 2)))])
    np.testing.assert_allclose(unit_rows([[3.0, 4.0], [0.0, 0.0]]), [[0.6, 0.8], [0.0, 0.0]])


def small_source(model: LocalMiniLMEmbedding, folder: Path, words: List[str] = WORDS) -> WordTableSource:
    return WordTableSource(model, words=words, cache_dir=folder)


def test_parts_are_keyed_by_the_words_and_split_by_part_size(embed_model: LocalMiniLMEmbedding, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(word_table, "PART_WORDS", 2)
    parts = word_table_paths(embed_model, WORDS, tmp_path)
    assert [w for w, _ in parts] == [["seattle", "city"], ["dog", "puppy"], ["painting"]]
    assert [p.name[-8:] for _, p in parts] == ["-000.npy", "-001.npy", "-002.npy"]
    assert parts[0][1].parent == tmp_path
    other = word_table_paths(embed_model, WORDS[::-1], tmp_path)
    assert other[0][1] != parts[0][1]


def test_ensure_makes_every_part_with_the_vectors_a_lookup_computes(embed_model: LocalMiniLMEmbedding,
                                                                    tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(word_table, "PART_WORDS", 2)
    table = small_source(embed_model, tmp_path).ensure()
    assert sorted(table) == sorted(WORDS)
    assert all(p.is_file() for _, p in word_table_paths(embed_model, WORDS, tmp_path))
    computed = WordVectors(embed_model).lookup(WORDS + ["roadtripping"])  # mixed widths, as a recall's batch
    for w in WORDS:
        np.testing.assert_array_equal(table[w], computed[w])
    # another source of the same files reads them (no model run)
    again = small_source(embed_model, tmp_path).get()
    assert again is not None and sorted(again) == sorted(WORDS)


def test_get_answers_none_then_the_parts_a_background_thread_made(embed_model: LocalMiniLMEmbedding,
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(word_table, "RECHECK_S", 0.0)
    source = small_source(embed_model, tmp_path)
    assert source.get() is None
    thread = word_table._STARTED[str(source.parts[0][1])]
    assert thread.name == "convrag-word-table" and thread.daemon
    thread.join(60)
    table = source.get()
    assert table is not None and sorted(table) == sorted(WORDS)


def test_a_part_another_process_is_making_is_left_to_it(embed_model: LocalMiniLMEmbedding, tmp_path: Path) -> None:
    source = small_source(embed_model, tmp_path)
    [(_, path)] = source.parts
    with FileLock(str(path) + ".lock"):  # held as another process would: the background make skips the part
        source._make(blocking=False)
        assert not path.exists()
    source._make(blocking=False)
    assert path.is_file()


def test_an_unreadable_part_is_skipped_with_a_warning(embed_model: LocalMiniLMEmbedding, tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    source = small_source(embed_model, tmp_path, ["zebra", "giraffe"])
    [(_, path)] = source.parts
    np.save(path, np.zeros((3, 384), dtype=np.float32))  # three rows for two words
    with caplog.at_level(logging.WARNING, logger=word_table.__name__):
        assert source._load() is None
    assert "unreadable" in caplog.text and path.name in caplog.text


def test_only_the_local_model_has_a_table(embed_model: LocalMiniLMEmbedding) -> None:
    assert isinstance(word_table_source(embed_model), WordTableSource)
    assert word_table_source(MockEmbedding(embed_dim=4)) is None


def test_a_set_stop_makes_nothing(embed_model: LocalMiniLMEmbedding, tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert build_word_table(embed_model, WORDS, tmp_path / "part.npy", stop) is False
    assert list(tmp_path.iterdir()) == []


def test_at_exit_a_background_maker_stops_after_its_call_and_writes_no_part(embed_model: LocalMiniLMEmbedding,
                                                                           tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(word_table, "BUILD_BATCH", 8)
    source = small_source(embed_model, tmp_path, list(vocabulary_words(embed_model.tokenizer_path)[:4000]))
    assert source.get() is None
    thread = word_table._STARTED[str(source.parts[0][1])]
    try:
        word_table._stop_makers()  # what the interpreter's exit runs (registered with atexit by the first maker)
        assert not thread.is_alive()
        assert source.get() is None and word_table._STARTED[str(source.parts[0][1])] is thread  # no new maker
    finally:
        word_table._STOP.clear()
    assert [p for p in tmp_path.iterdir() if p.suffix == ".npy"] == []  # the part begun is not written, no temp file
