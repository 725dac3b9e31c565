import sys

import numpy as np
import pytest

from llama_index_convrag.embeddings.local import (
    EMBED_DIM,
    LocalMiniLMEmbedding,
    length_batches,
    mean_pool_normalise,
)


def test_length_batches_groups_longest_first():
    assert length_batches([3, 10, 1, 7, 5], 2) == [[1, 3], [4, 0], [2]]
    assert length_batches([], 4) == []


def test_length_batches_bound_attention_cells():
    """Long texts go fewer at a time (rows x width^2 <= max_cells), short ones up to batch_size; one never splits."""
    lengths = [256] * 10 + [64] * 40
    batches = length_batches(lengths, 32, max_cells=8 * 256 * 256)
    assert [len(b) for b in batches] == [8, 8, 32, 2]  # the second: 2 long texts, then 6 short ones fit
    assert all(len(b) * max(lengths[i] for i in b) ** 2 <= 8 * 256 * 256 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(50))
    assert length_batches([300], 32, max_cells=10) == [[0]]


def test_mean_pool_ignores_padding_and_normalises():
    hidden = np.array([[[1.0, 0.0], [3.0, 0.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    out = mean_pool_normalise(hidden, mask)
    np.testing.assert_allclose(out, [[1.0, 0.0]])


def test_vectors_are_unit_norm_and_384d(embed_model):
    vectors = embed_model.embed(["a cat sat on the mat", "Milvus stores vectors", ""])
    assert vectors.shape == (3, EMBED_DIM)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_semantics_are_real(embed_model):
    q = embed_model.get_query_embedding("How do plants make energy from sunlight?")
    docs = embed_model.get_text_embedding_batch(
        ["Photosynthesis converts light energy into chemical energy in chloroplasts.",
         "The stock market fell sharply on Tuesday after the rate decision."]
    )
    sims = np.asarray(docs) @ np.asarray(q)
    assert sims[0] > sims[1] + 0.3


def test_batching_does_not_change_vectors(embed_model):
    texts = ["short", "a much longer sentence with many more tokens than the first one in it", "medium length text"]
    together = embed_model.embed(texts)
    alone = np.vstack([embed_model.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_query_cache_returns_same_vector_and_is_bounded():
    model = LocalMiniLMEmbedding(query_cache_size=2)
    first = model.get_query_embedding("alpha")
    assert model.get_query_embedding("alpha") == first
    model.get_query_embedding("beta")
    model.get_query_embedding("gamma")
    assert list(model._query_cache) == ["beta", "gamma"]


async def test_async_matches_sync(embed_model):
    sync = embed_model.get_query_embedding("async twin")
    assert await embed_model.aget_query_embedding("async twin") == sync


def test_loading_needs_no_hub_and_no_torch(embed_model):
    # the guard fixture blocks any non-loopback socket; loading must also not pull hub clients or torch
    LocalMiniLMEmbedding(num_threads=1).warm_up()
    assert "torch" not in sys.modules
    assert "sentence_transformers" not in sys.modules
    assert "huggingface_hub" not in sys.modules or not hasattr(sys.modules["huggingface_hub"], "_convrag_used")


def test_missing_model_file_names_the_path():
    model = LocalMiniLMEmbedding(model_path="/nonexistent/model.onnx")
    with pytest.raises(FileNotFoundError, match="/nonexistent/model.onnx"):
        model.embed(["x"])


def test_bad_batch_size_is_rejected():
    with pytest.raises(ValueError, match="embed_batch_size"):
        LocalMiniLMEmbedding(embed_batch_size=0)


def test_window_is_stated_and_token_counts_are_untruncated(embed_model):
    from llama_index_convrag.embeddings.windows import model_window

    assert model_window(embed_model) == embed_model.max_input_tokens == embed_model.max_length == 256
    long = "word " * 600
    assert embed_model.count_tokens([long, "hello world"]) == [602, 4]
    spans, starts = embed_model.token_spans("embedding models")
    assert [("embedding models")[a:b] for a, b in spans][:1] == ["em"] and starts[0] and not starts[1]


def test_the_graph_optimisation_level_is_one_onnx_runtime_names():
    from llama_index_convrag.errors import ConfigurationError

    assert LocalMiniLMEmbedding(graph_optimization="ORT_ENABLE_EXTENDED").graph_optimization == "ORT_ENABLE_EXTENDED"
    with pytest.raises(ConfigurationError, match=r"graph_optimization must be one of \['ORT_ENABLE_BASIC', "
                                                 r"'ORT_ENABLE_EXTENDED', 'ORT_ENABLE_ALL'\] or None, got 'fast'"):
        LocalMiniLMEmbedding(graph_optimization="fast")
