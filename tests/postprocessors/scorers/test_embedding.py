from __future__ import annotations

import numpy as np
import pytest

from llama_index_convrag.postprocessors.scorers.embedding import EmbeddingScorer, pool_scores, split_windows

LONG = " ".join(f"w{i}" for i in range(10))


def test_split_windows_cover_the_text_with_overlap():
    assert split_windows(LONG, 4, 1) == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert split_windows(LONG, 4, 0) == ["w0 w1 w2 w3", "w4 w5 w6 w7", "w8 w9"]
    assert split_windows(LONG, None, 0) == [LONG]
    assert split_windows("a b", 4, 1) == ["a b"]


def test_pool_scores_max_and_mean_on_hand_built_vectors():
    windows = [np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[3.0, 4.0]])]
    assert pool_scores([0.0, 1.0], windows, "max") == pytest.approx([1.0, 0.8])
    assert pool_scores([0.0, 1.0], windows, "mean") == pytest.approx([0.5, 0.8])


class CountingEmbedding:
    """Wraps the real model to count the texts it embeds."""

    def __init__(self, model):
        self.model = model
        self.embedded = []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def get_text_embedding_batch(self, texts, **kw):
        self.embedded.extend(texts)
        return self.model.get_text_embedding_batch(texts, **kw)

    async def aget_text_embedding_batch(self, texts, **kw):
        self.embedded.extend(texts)
        return await self.model.aget_text_embedding_batch(texts, **kw)


FILLER = " ".join(["The committee reviewed budgets, schedules and staffing for the coming year."] * 12)
TAIL = "Chloroplasts convert light into chemical energy during photosynthesis."
QUERY = "How do plants turn light into energy?"


def test_windows_find_an_answer_past_the_model_window(embed_model):
    text = f"{FILLER} {TAIL}"  # the answer sits after ~130 words
    whole = EmbeddingScorer(embed_model, window_words=None).score(QUERY, [text])[0]
    windowed = EmbeddingScorer(embed_model, window_words=16, overlap_words=6).score(QUERY, [text])[0]
    tail_only = EmbeddingScorer(embed_model).score(QUERY, [TAIL])[0]
    assert windowed > whole + 0.2
    assert windowed <= tail_only + 1e-6


async def test_async_twin_and_cache(embed_model):
    counting = CountingEmbedding(embed_model)
    scorer = EmbeddingScorer(counting, window_words=64, overlap_words=16)  # type: ignore[arg-type]
    texts = [f"{FILLER} {TAIL}", TAIL, TAIL]
    first = scorer.score(QUERY, texts)
    n_windows = len(split_windows(texts[0], 64, 16)) + 1
    assert len(counting.embedded) == n_windows  # duplicates embedded once
    second = await scorer.ascore(QUERY, texts)
    assert len(counting.embedded) == n_windows  # all cached
    assert second == pytest.approx(first)
    assert first[1] == first[2]


def test_small_cache_evicts_without_losing_scores(embed_model):
    scorer = EmbeddingScorer(embed_model, cache_size=1)
    scorer.score(QUERY, ["a"])
    scores = scorer.score(QUERY, ["a", "b", "c"])
    assert len(scores) == 3 and len(scorer._cache) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"window_words": 0}, "window_words must be >= 1 or None (whole text), got 0"),
     ({"window_words": 10, "overlap_words": 10}, "overlap_words must be in [0, 9] (window_words - 1), got 10"),
     ({"pooling": "sum"}, "pooling must be one of ['max', 'mean'], got 'sum'"),
     ({"cache_size": -1}, "cache_size must be >= 0, got -1")],
)
def test_validation(embed_model, kwargs, message):
    with pytest.raises(ValueError) as info:
        EmbeddingScorer(embed_model, **kwargs)
    assert str(info.value) == message


def test_name_names_the_model(embed_model):
    assert EmbeddingScorer(embed_model).name == "embedding:all-MiniLM-L6-v2-onnx-int8"


def test_cache_export_and_seed(embed_model):
    counting = CountingEmbedding(embed_model)
    first = EmbeddingScorer(embed_model)
    expected = first.score(QUERY, [TAIL])
    seeded = EmbeddingScorer(counting)  # type: ignore[arg-type]
    seeded.add_to_cache(first.cached_windows())
    assert seeded.score(QUERY, [TAIL]) == pytest.approx(expected)
    assert counting.embedded == []
