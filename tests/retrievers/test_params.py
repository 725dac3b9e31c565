import pytest
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llama_index_convrag.milvus.schema import BM25, DENSE, CollectionSpec, VectorField
from llama_index_convrag.retrievers.params import validate_params

SPEC = CollectionSpec(vector_fields=(VectorField("embedding", DENSE, "COSINE", 4),
                                     VectorField("title_embedding", DENSE, "IP", 4),
                                     VectorField("sparse_embedding", BM25, "BM25")))


def test_defaults_per_search_type():
    dense = validate_params(SPEC, search_type="dense", ranker_type="rrf")
    assert dense.search_fields == ("embedding",)
    assert dense.search_params == {"embedding": {"metric_type": "COSINE", "params": {}}}
    assert dense.ranker_params == {"k": 60} and dense.fusion_depth == 10
    sparse = validate_params(SPEC, search_type="sparse")
    assert sparse.search_params == {"sparse_embedding": {"metric_type": "BM25", "params": {"drop_ratio_search": 0.0}}}
    hybrid = validate_params(SPEC, search_type="hybrid", ranker_type="weighted", similarity_top_k=150)
    assert hybrid.search_fields == ("embedding", "sparse_embedding")
    assert hybrid.ranker_params == {"weights": (0.5, 0.5)} and hybrid.fusion_depth == 150


def test_model_defaults():
    model = SimilarityPostprocessor()
    p = validate_params(SPEC, search_type="hybrid", ranker_type="model", ranker_params={"model": model})
    assert p.ranker_params == {"model": model, "pre_topk": 10, "pre_ranker_type": "weighted",
                               "pre_ranker_params": {"weights": (0.5, 0.5)}}
    assert p.candidates() == 10 and p.fusion() == ("weighted", {"weights": (0.5, 0.5)})
    assert p.fusion_depth == 100


@pytest.mark.parametrize("kw, message", [
    (dict(search_type="semantic"), "search_type must be one of ['dense', 'hybrid', 'sparse'], got 'semantic'"),
    (dict(ranker_type="max"), "ranker_type must be one of ['model', 'rrf', 'weighted'], got 'max'"),
    (dict(similarity_top_k=0), "similarity_top_k must be an int >= 1, got 0"),
    (dict(search_fields=["body"]), "unknown search field 'body'; vector fields: ['embedding', 'title_embedding', 'sparse_embedding']"),
    (dict(search_type="dense", search_fields=["embedding", "sparse_embedding"]), "search_type 'dense' searches one field, got ['embedding', 'sparse_embedding']; use 'hybrid'"),
    (dict(search_type="sparse", search_fields=["embedding"]), "search_type 'sparse' needs a bm25 field, got 'embedding'; accepted: ['sparse_embedding']"),
    (dict(search_type="hybrid", search_fields=["embedding"]), "search_type 'hybrid' needs two or more fields, got ['embedding']"),
    (dict(search_type="hybrid", search_fields=["embedding", "sparse_embedding"], search_params={"embedding": {"metric_type": "COSINE"}}),
     "missing ['sparse_embedding']"),
    (dict(search_params={"embedding": {}, "title_embedding": {}}), "search_params names fields not searched: ['title_embedding']"),
    (dict(search_type="sparse", search_params={"sparse_embedding": {"data": [0.1, 0.2]}}),
     "must not contain 'data': a BM25 field takes the raw query text, not a vector"),
    (dict(search_type="sparse", search_params={"sparse_embedding": {"metric_type": "IP"}}), "BM25 field 'sparse_embedding' takes metric_type 'BM25', got 'IP'"),
    (dict(search_type="dense", search_params={"embedding": {"metric_type": "L2"}}), "dense field 'embedding' is indexed with metric 'COSINE', got 'L2'"),
    (dict(search_type="hybrid", ranker_type="weighted", ranker_params={"weights": [0.5]}), "weights needs one value per searched field ['embedding', 'sparse_embedding'] (2), got [0.5]"),
    (dict(search_type="hybrid", ranker_type="weighted", ranker_params={"weights": [0.5, 1.5]}), "each weight must be in [0, 1], got 1.5"),
    (dict(search_type="hybrid", ranker_type="rrf", ranker_params={"k": -1}), "rrf k must be a number >= 0, got -1"),
    (dict(search_type="hybrid", ranker_type="rrf", ranker_params={"weights": [1, 0]}), "ranker_params for 'rrf' accepts ['k'], got unknown ['weights']"),
    (dict(search_type="hybrid", ranker_type="model", ranker_params={"model": "bge"}), "ranker_params['model'] must be a LlamaIndex BaseNodePostprocessor, got 'bge'"),
    (dict(search_type="hybrid", fusion_depth=3), "fusion_depth must be >= the number of fused results (10), got 3"),
    (dict(filters=MetadataFilters(filters=[MetadataFilter(key="a", value=1, operator=FilterOperator.ANY)])), "filter operator must be one of"),
])
def test_errors_name_the_bad_value_and_the_accepted_ones(kw, message):
    with pytest.raises(ValueError) as info:
        validate_params(SPEC, **kw)
    assert message in str(info.value)


def test_model_pre_ranker_weighted_needs_matching_weights():
    model = SimilarityPostprocessor()
    p = validate_params(SPEC, search_type="hybrid", ranker_type="model",
                        ranker_params={"model": model, "pre_ranker_type": "weighted", "pre_ranker_params": {"weights": [0.2, 0.8]}})
    assert p.fusion() == ("weighted", {"weights": (0.2, 0.8)}) and p.fusion_depth == 100
    with pytest.raises(ValueError, match="pre_ranker_type must be one of \\['rrf', 'weighted'\\], got 'model'"):
        validate_params(SPEC, search_type="hybrid", ranker_type="model", ranker_params={"model": model, "pre_ranker_type": "model"})


def test_library_default_is_weighted_hybrid_and_the_cli_agrees():
    from llama_index_convrag.cli import build_parser

    p = validate_params(SPEC)
    assert (p.search_type, p.ranker_type, p.search_fields) == ("hybrid", "weighted", ("embedding", "sparse_embedding"))
    assert p.ranker_params == {"weights": (0.5, 0.5)} and p.fusion_depth == 100
    args = build_parser().parse_args(["chat", "docs"])
    assert (args.search_type, args.ranker) == (p.search_type, p.ranker_type)
    cli = validate_params(SPEC, search_type=args.search_type, ranker_type=args.ranker)
    assert cli.feedback == p.feedback and p.feedback is not None and (p.feedback.docs, p.feedback.weight) == (3, 0.5)


@pytest.mark.parametrize("fields, expected", [(None, "hybrid"), (["embedding"], "dense"),
                                              (["sparse_embedding"], "sparse"),
                                              (["embedding", "title_embedding"], "hybrid")])
def test_default_search_type_follows_the_fields(fields, expected):
    assert validate_params(SPEC, search_fields=fields).search_type == expected


def test_default_search_type_without_bm25_is_dense():
    dense_only = CollectionSpec(vector_fields=(VectorField("embedding", DENSE, "COSINE", 4),))
    assert validate_params(dense_only).search_type == "dense"
