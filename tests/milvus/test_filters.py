from typing import Any

import pytest
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from llama_index_convrag.milvus.schema import CollectionSpec, create_collection, default_spec
from llama_index_convrag.milvus.filters import filters_to_expr, quote_string

SPEC = CollectionSpec()
HOSTILE = ['a"b', "a\\b", '" or 1==1 or "', "line\nbreak", "it's", "tab\there", "trail\\", '\\"',
           "x) or (1==1", "%_%", "ünïcødé ☃", ""]


def expr(*filters: MetadataFilter, condition: FilterCondition = FilterCondition.AND) -> str:
    return filters_to_expr(MetadataFilters(filters=list(filters), condition=condition), SPEC.metadata_ref)


def test_quote_string_escapes_only_what_milvus_unescapes():
    assert quote_string('a"b\\c') == '"a\\"b\\\\c"'
    assert quote_string("x\ny") == '"x\\\ny"'


def test_operators_and_nesting():
    inner = MetadataFilters(filters=[MetadataFilter(key="y", value=1, operator=FilterOperator.LT),
                                     MetadataFilter(key="y", value=2.5, operator=FilterOperator.GTE)],
                            condition=FilterCondition.OR)
    outer = MetadataFilters(filters=[MetadataFilter(key="t", value=["a", "b"], operator=FilterOperator.IN), inner,
                                     MetadataFilter(key="ok", value="no", operator=FilterOperator.NE)])
    assert filters_to_expr(outer, SPEC.metadata_ref) == (
        '(metadata["t"] in ["a", "b"]) and ((metadata["y"] < 1) or (metadata["y"] >= 2.5)) and (metadata["ok"] != "no")')
    assert expr(MetadataFilter(key="tags", value="x", operator=FilterOperator.CONTAINS)) == '(json_contains(metadata["tags"], "x"))'
    assert expr(MetadataFilter(key="t", value="5%", operator=FilterOperator.TEXT_MATCH)) == '(metadata["t"] like "%5\\\\%%")'
    assert expr(MetadataFilter(key="t", value=[1], operator=FilterOperator.NIN)) == '(metadata["t"] not in [1])'
    assert filters_to_expr(None, SPEC.metadata_ref) == ""


def test_carriage_returns_are_refused_because_milvus_cannot_express_them():
    with pytest.raises(ValueError, match="cannot contain a carriage return"):
        expr(MetadataFilter(key="k", value="cr\rlf"))


def test_keys_with_control_characters_are_refused():
    with pytest.raises(ValueError, match="contains a control character"):
        expr(MetadataFilter(key="a\nb", value=1))


def test_bad_values_are_rejected():
    with pytest.raises(ValueError, match="IN/NIN filter value must be a list, got 'a'"):
        expr(MetadataFilter(key="t", value="a", operator=FilterOperator.IN))
    with pytest.raises(ValueError, match="must be finite, got nan"):
        expr(MetadataFilter(key="t", value=float("nan")))


@pytest.fixture
def hostile_collection(milvus_client: Any, collection_name: str) -> str:
    create_collection(milvus_client, collection_name, default_spec(2))
    rows = [{"id": f"r{i}", "doc_id": f"d{i}", "text": "same text", "embedding": [1.0, 0.0],
             "metadata": {"k": v, "tags": ["t", v], f"key{v}": 1}} for i, v in enumerate(HOSTILE)]
    rows.append({"id": "other", "doc_id": "o", "text": "same", "embedding": [0.0, 1.0],
                 "metadata": {"k": "other", "tags": ["t"]}})
    milvus_client.insert(collection_name, rows)
    return collection_name


def test_hostile_values_match_literally_in_real_milvus(milvus_client, hostile_collection):
    for i, value in enumerate(HOSTILE):
        for f in (MetadataFilter(key="k", value=value),
                  MetadataFilter(key="k", value=[value], operator=FilterOperator.IN),
                  MetadataFilter(key="tags", value=value, operator=FilterOperator.CONTAINS),
                  *([] if any(ord(c) < 32 for c in value) else [MetadataFilter(key=f"key{value}", value=1)])):
            got = milvus_client.query(hostile_collection, filter=expr(f), output_fields=["id"])
            assert [r["id"] for r in got] == [f"r{i}"], (value, expr(f))
        ne = milvus_client.query(hostile_collection, filter=expr(MetadataFilter(key="k", value=value, operator=FilterOperator.NE)),
                                 output_fields=["id"])
        assert len(ne) == len(HOSTILE)  # everything else, i.e. nothing leaked into the expression


def test_text_match_is_a_literal_substring(milvus_client, hostile_collection):
    def run(value: str) -> list:
        f = MetadataFilter(key="k", value=value, operator=FilterOperator.TEXT_MATCH)
        return sorted(r["id"] for r in milvus_client.query(hostile_collection, filter=expr(f), output_fields=["id"]))

    assert run("%_") == [f"r{HOSTILE.index('%_%')}"]
    assert run("1==1") == sorted(f"r{i}" for i, v in enumerate(HOSTILE) if "1==1" in v) and len(run("1==1")) == 2
    assert run('"') == sorted(f"r{i}" for i, v in enumerate(HOSTILE) if '"' in v)
    assert run("\\") == sorted(f"r{i}" for i, v in enumerate(HOSTILE) if "\\" in v)
