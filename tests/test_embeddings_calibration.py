"""The static int8 variant's calibration text: shipped with the package, fed one text per run."""

from __future__ import annotations

import numpy as np

from llama_index_convrag.embeddings.calibration import (CALIBRATION_FILE, CalibrationFeeds, JOINED_LINES,
                                                        calibration_inputs, calibration_texts)


def test_the_texts_are_the_file_s_lines_then_runs_of_them_joined(tmp_path):
    path = tmp_path / "cal.txt"
    path.write_text("one\n\n two \nthree\nfour\nfive\n", encoding="utf-8")
    assert calibration_texts(path) == ["one", "two", "three", "four", "five", "one two three four", "five"]
    shipped = calibration_texts()
    lines = [line for line in CALIBRATION_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert shipped[: len(lines)] == lines and len(shipped) == len(lines) + -(-len(lines) // JOINED_LINES)


def test_each_text_is_one_unpadded_run_within_the_window():
    feeds = calibration_inputs(["a short question?", "word " * 400])
    assert [f["input_ids"].shape for f in feeds] == [(1, 6), (1, 256)]
    assert all(np.all(f["attention_mask"] == 1) and np.all(f["token_type_ids"] == 0) for f in feeds)
    reader = CalibrationFeeds(feeds)
    assert reader.get_next() is feeds[0] and list(reader) == [feeds[1]] and reader.get_next() is None
