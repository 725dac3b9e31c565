"""The fused fp32 graph: ONNX Runtime's fused kernels, the installed network's vectors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from llama_index_convrag.embeddings import local
from llama_index_convrag.embeddings.fuse import EXPECTED_FUSED, check_fused
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding, default_model_path, mean_pool_normalise
from llama_index_convrag.errors import ConfigurationError

TEXTS = ["hello world", "Milvus supports BM25 full text search.", " ".join(f"word {i}" for i in range(200)),
         " ".join(f"Sentence {i} of a long passage about rivers and their deltas." for i in range(30))]


def _installed_vectors(model: LocalMiniLMEmbedding, texts: list) -> np.ndarray:
    """The installed file, unoptimised, one text per run (no padding): the network as shipped."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(str(default_model_path()), sess_options=options, providers=["CPUExecutionProvider"])
    tok = local._load_tokenizer(model.tokenizer_path, model.max_length)
    rows = []
    for text in texts:
        ids = np.array([tok.encode(text).ids], dtype=np.int64)
        mask = np.ones_like(ids)
        hidden = plain.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        rows.append(mean_pool_normalise(hidden, mask)[0])
    return np.vstack(rows)


def test_the_default_runs_the_fused_graph_with_the_installed_networks_vectors(embed_model):
    assert embed_model.variant == "fp32" and embed_model.onnx_path != str(default_model_path())
    ops = Counter(n.op_type for n in onnx.load(embed_model.onnx_path).graph.node)
    assert {op: ops[op] for op in EXPECTED_FUSED} == EXPECTED_FUSED
    assert not {"Softmax", "IsNaN", "Where", "Transpose", "Erf"} & set(ops)
    ours = embed_model.embed(TEXTS)  # batched: the short texts are padded to the long ones' width
    np.testing.assert_allclose(ours, _installed_vectors(embed_model, TEXTS), atol=1e-5)


def test_a_graph_the_rewrite_does_not_know_is_refused_by_the_check():
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    with pytest.raises(ConfigurationError, match=r"gave \{'MultiHeadAttention': 0, .*expected"):
        check_fused(helper.make_model(graph))


def test_fp32_of_a_file_the_fusion_does_not_know_runs_that_file(tmp_path):
    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "other.onnx"
    onnx.save(helper.make_model(graph), str(path))
    assert local.variant_path(str(path), "fp32") == str(path)
