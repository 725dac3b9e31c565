"""Only what runs without torch: path validation and the install hint (the model itself is untested here)."""

from __future__ import annotations

import importlib.util

import pytest

from llama_index_convrag.postprocessors.scorers.cross_encoder import CrossEncoderScorer, load_cross_encoder_class


def test_refuses_a_missing_path_instead_of_downloading(tmp_path):
    with pytest.raises(ValueError) as info:
        CrossEncoderScorer("cross-encoder/ms-marco-MiniLM-L-6-v2")
    assert str(info.value) == (
        "model_path must be an existing local folder holding a cross-encoder (no hub downloads), "
        "got 'cross-encoder/ms-marco-MiniLM-L-6-v2'"
    )


def test_refuses_a_folder_without_config(tmp_path):
    with pytest.raises(ValueError, match="has no config.json"):
        CrossEncoderScorer(tmp_path)


def test_valid_folder_builds_lazily_and_names_the_model(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    scorer = CrossEncoderScorer(tmp_path, max_length=256)
    assert scorer.name == f"cross-encoder:{tmp_path.name}"
    assert scorer.score("q", []) == []  # nothing loaded for an empty batch


@pytest.mark.parametrize(("kwargs", "message"), [({"max_length": 0}, "max_length must be >= 1, got 0"),
                                                  ({"batch_size": 0}, "batch_size must be >= 1, got 0")])
def test_validation(tmp_path, kwargs, message):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError) as info:
        CrossEncoderScorer(tmp_path, **kwargs)
    assert str(info.value) == message


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is not None,
                    reason="sentence-transformers is installed")
def test_missing_extra_gives_the_install_hint(tmp_path):
    with pytest.raises(ImportError, match=r"pip install 'llama-index-convrag\[rerank-st\]'"):
        load_cross_encoder_class()
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ImportError, match="CrossEncoderScorer needs sentence-transformers"):
        CrossEncoderScorer(tmp_path).score("q", ["a"])
