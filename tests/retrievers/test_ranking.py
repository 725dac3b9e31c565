"""Ranking: kept candidates' scores, trails and which rows are still to fetch; FieldRequest for several queries."""

from llama_index_convrag.milvus.schema import default_spec
from llama_index_convrag.retrievers.ranking import FieldRequest, Ranking, known_entities, stage_label


def ranking(entities=None) -> Ranking:
    return Ranking(kept=[("a", 0.9), ("b", 0.5)], pks={"a": 1, "b": 2},
                   stages=[("dense:embedding", {"a": (2, 0.8), "b": (1, 0.85)}), ("sparse:sparse_embedding",
                                                                                  {"a": (1, 7.0)})],
                   fused_stage="fusion:weighted", entities=entities)


def test_trail_lists_the_fields_that_found_a_key_then_its_fused_rank() -> None:
    r = ranking()
    assert r.trail("a") == [("dense:embedding", 2, 0.8), ("sparse:sparse_embedding", 1, 7.0),
                            ("fusion:weighted", 1, 0.9)]
    assert r.trail("b") == [("dense:embedding", 1, 0.85), ("fusion:weighted", 2, 0.5)]
    assert (r.score("a"), r.score("b")) == (0.9, 0.5)
    single = Ranking(kept=[("x", 1.0)], pks={"x": "x"}, stages=[], fused_stage=None)
    assert single.trail("x") == []


def test_unknown_names_the_primary_keys_whose_fields_are_not_held() -> None:
    assert ranking().unknown(["b", "a"]) == [2, 1]
    assert ranking({"a": {"text": "t"}}).unknown(["a", "b"]) == [2]


def test_known_entities_take_the_first_list_holding_each_kept_id() -> None:
    first = [{"id": 1, "entity": {"text": "one"}}, {"id": 9, "entity": {"text": "nine"}}]
    second = [{"id": 1, "entity": {"text": "later"}}, {"id": 2, "entity": {"text": "two"}}]
    assert known_entities([first, second], {"1": 1, "2": 2}) == {"1": {"text": "one"}, "2": {"text": "two"}}


def test_field_request_carries_every_query_and_stage_labels_name_the_kind() -> None:
    req = FieldRequest("embedding", [[0.1], [0.2]], 5, {"metric_type": "COSINE"})
    ann = req.ann("")
    assert (ann.data, ann.anns_field, ann.limit, ann.expr) == ([[0.1], [0.2]], "embedding", 5, None)
    assert req.ann('doc_id == "x"').expr == 'doc_id == "x"'
    spec = default_spec(384)
    assert (stage_label(spec, "embedding"), stage_label(spec, "sparse_embedding")) == \
        ("dense:embedding", "sparse:sparse_embedding")
