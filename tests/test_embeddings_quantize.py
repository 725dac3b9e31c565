"""The int8-compute variant: made from the installed file once, cached by key, close to the fp32 vectors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Iterator, List

import numpy as np
import onnx
import pytest

from llama_index_convrag.embeddings import calibration, model_files, quantize
from llama_index_convrag.embeddings.local import INT8_RECIPE, LocalMiniLMEmbedding, default_model_path
from llama_index_convrag.embeddings.model_files import fused_model_path, int8_model_path
from llama_index_convrag.embeddings.quantize import LAYER_NAMES, Int8Recipe, weight_matmuls
from llama_index_convrag.errors import ConfigurationError

TEXTS = ["How do plants make energy from sunlight?", "Milvus stores vectors and runs BM25 keyword search.",
         " ".join(f"Sentence {i} of a long passage about rivers and their deltas." for i in range(30))]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache folder of this module's own (``CONVRAG_CACHE_DIR``), so the conversion is tested, not reused."""
    root = tmp_path_factory.mktemp("cache")
    saved = os.environ.get("CONVRAG_CACHE_DIR")
    os.environ["CONVRAG_CACHE_DIR"] = str(root)
    yield root / "models"
    if saved is None:
        os.environ.pop("CONVRAG_CACHE_DIR")
    else:
        os.environ["CONVRAG_CACHE_DIR"] = saved


@pytest.fixture(scope="module")
def int8_model(cache: Path) -> LocalMiniLMEmbedding:
    model = LocalMiniLMEmbedding(variant="int8", query_cache_size=0)
    model.warm_up()
    return model


def test_the_variant_is_made_once_into_the_cache_and_reads_like_fp32(int8_model, cache, embed_model):
    [made] = [p for p in model_files.cached_variants(cache) if p.name.startswith("minilm-int8-")]
    assert made.name == f"minilm-int8-{model_files.cache_key(default_model_path(), INT8_RECIPE)}.onnx"
    assert [p for p in cache.iterdir() if p.name.startswith(".")] == []  # no temporary file left behind
    stamp = made.stat().st_mtime_ns
    assert int8_model_path(default_model_path(), INT8_RECIPE) == made and made.stat().st_mtime_ns == stamp
    assert int8_model.onnx_path == str(made)
    fp32_file = Path(LocalMiniLMEmbedding(variant="fp32").onnx_path)  # the process may have made it elsewhere first
    assert fp32_file.name == fused_model_path(default_model_path()).name
    graph = onnx.load(str(made)).graph
    kinds = {n.name: n.op_type for n in graph.node}
    assert sum(k == "MatMulInteger" for k in kinds.values()) == len(LAYER_NAMES) - len(INT8_RECIPE.keep_float)
    ours, theirs = int8_model.embed(TEXTS), LocalMiniLMEmbedding(variant="fp32").embed(TEXTS)
    cosine = (ours * theirs).sum(axis=1)
    assert cosine.min() > 0.98 and np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_each_variant_names_itself_for_the_collection_record(int8_model):
    fp32 = LocalMiniLMEmbedding(variant="fp32")
    assert fp32.embed_model_id == "LocalMiniLMEmbedding:all-MiniLM-L6-v2-onnx-int8:fp32"
    assert int8_model.embed_model_id == f"LocalMiniLMEmbedding:all-MiniLM-L6-v2-onnx-int8:int8-fuse1-{INT8_RECIPE.key()}"
    assert LocalMiniLMEmbedding(fused=False).embed_model_id == fp32.embed_model_id  # the same vectors
    assert LocalMiniLMEmbedding(model_path="/x/mine.onnx").embed_model_id.endswith(":mine.onnx:fp32")
    with pytest.raises(ConfigurationError, match=r"variant must be one of \['fp32', 'int8'\], got 'int4'"):
        LocalMiniLMEmbedding(variant="int4")


def test_a_failed_conversion_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    def broken(source: Path, dest: Path, recipe: Int8Recipe) -> None:
        dest.write_bytes(b"half a model")
        raise RuntimeError("disk full")

    monkeypatch.setattr(model_files, "make_int8", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        int8_model_path(default_model_path(), Int8Recipe(), cache_dir=tmp_path)
    [record] = tmp_path.iterdir()  # only the source file's hash, which stays valid
    assert record.name.startswith("sha256-") and record.read_text() == model_files.source_digest(default_model_path())


def test_the_recipe_is_validated_and_keyed():
    with pytest.raises(ConfigurationError, match=r"keep_float names unknown layers \['layer9.query'\]; layers are"):
        Int8Recipe(keep_float=("layer9.query",))
    assert Int8Recipe(keep_float=("layer1.ffn_out", "layer0.query")).keep_float == ("layer0.query", "layer1.ffn_out")
    assert Int8Recipe().key() != Int8Recipe(reduce_range=True).key() == Int8Recipe(reduce_range=True).key()
    assert Int8Recipe().key() == "e445516e1c"  # a new field with its default keeps the variant ids collections hold
    assert Int8Recipe(weights="uint8").key() != Int8Recipe().key()
    with pytest.raises(ConfigurationError, match=r"weights must be one of \['int8', 'uint8'\], got 'int4'"):
        Int8Recipe(weights="int4")
    assert Int8Recipe(keep_float=INT8_RECIPE.keep_float, activations="dynamic").key() == "1cc93e918e"
    assert Int8Recipe(activations="static").key() not in {Int8Recipe().key(), Int8Recipe(weights="uint8").key()}
    with pytest.raises(ConfigurationError, match=r"activations must be one of \['dynamic', 'static'\], got 'fixed'"):
        Int8Recipe(activations="fixed")


def test_another_graph_is_refused_rather_than_quantized_with_the_wrong_layers():
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.0] * 16)
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [weight])
    with pytest.raises(ConfigurationError, match=r"1 weight MatMuls \(expected 36\); pass variant='fp32'"):
        weight_matmuls(helper.make_model(graph))


def test_weight_matmuls_name_the_six_per_layer_of_minilm():
    model = quantize.fold_weights(onnx.load(str(default_model_path())))
    layers = weight_matmuls(model)
    assert list(layers)[:6] == ["layer0.query", "layer0.key", "layer0.value", "layer0.attention_out",
                                "layer0.ffn_in", "layer0.ffn_out"]
    assert len(set(layers.values())) == 36
    ops = {n.op_type for n in model.graph.node}
    assert "Cast" not in ops or all(n.op_type != "Cast" or n.input[0] not in {i.name for i in model.graph.initializer}
                                    for n in model.graph.node)


def test_an_int8_vector_does_not_depend_on_the_texts_embedded_with_it(int8_model):
    """Dynamic quantization scales a run's activations over the whole run: one text per run keeps vectors exact."""
    together = int8_model.embed(TEXTS)
    alone = np.vstack([int8_model.embed([t]) for t in TEXTS])
    np.testing.assert_array_equal(together, alone)


@pytest.fixture(scope="module")
def static_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A static int8 copy (every weight MatMul quantized) calibrated on two of :data:`TEXTS`: the wiring is tested
    here, the scales the shipped calibration text gives by ``bench/embedding_fidelity.py --sensitivity``."""
    patch = pytest.MonkeyPatch()
    patch.setattr(calibration, "calibration_texts", lambda: TEXTS[:2])
    try:
        return int8_model_path(default_model_path(), Int8Recipe(activations="static"),
                               cache_dir=tmp_path_factory.mktemp("static"))
    finally:
        patch.undo()


def test_a_static_copy_quantizes_each_weight_matmul_input_and_leaves_the_residual_float(static_file):
    graph = onnx.load(str(static_file)).graph
    producer = {out: node for node in graph.node for out in node.output}
    readers: Dict[str, List[str]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node.op_type)
    dequantized = [n for n in graph.node if n.op_type == "DequantizeLinear" and n.input[0] in producer]
    assert {r for dq in dequantized for r in readers[dq.output[0]]} == {"MatMul"}
    weight_inputs = {n.name: producer[n.input[0]].op_type for n in graph.node if n.op_type == "MatMul"}
    assert len(weight_inputs) == 36 and set(weight_inputs.values()) == {"DequantizeLinear"}
    assert sum(n.op_type == "QuantizeLinear" for n in graph.node) == 24  # q, k, v share one input per layer


def test_a_static_copy_runs_int8_kernels_and_embeds_a_batch_as_each_text_alone(static_file, tmp_path, embed_model):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(static_file), options, providers=["CPUExecutionProvider"])
    kinds = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    assert kinds.count("MatMulIntegerToFloat") == 36 and "DequantizeLinear" not in kinds
    model = LocalMiniLMEmbedding(model_path=str(static_file), graph_optimization="ORT_ENABLE_EXTENDED",
                                 query_cache_size=0)
    together = model.embed(TEXTS)
    np.testing.assert_allclose(together, np.vstack([model.embed([t]) for t in TEXTS]), atol=1e-6)
    assert (together * embed_model.embed(TEXTS)).sum(axis=1).min() > 0.9


def test_other_readers_of_a_quantized_tensor_read_the_float_tensor():
    from onnx import TensorProto, helper

    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
             helper.make_node("MatMul", ["xd", "w"], ["y"], name="mm"),
             helper.make_node("Add", ["xd", "y"], ["out"], name="residual")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2])])
    model = helper.make_model(graph)
    assert quantize.float_other_readers(model, {"mm"}) == 1
    assert [list(n.input) for n in model.graph.node][2:] == [["xd", "w"], ["x", "y"]]
