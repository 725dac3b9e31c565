import math

import pytest

from llama_index_convrag.milvus.schema import BM25, DENSE, CollectionSpec, VectorField
from llama_index_convrag.retrievers.feedback import Feedback, feedback_vector, validate_feedback

SPEC = CollectionSpec(vector_fields=(VectorField("embedding", DENSE, "COSINE", 2),
                                     VectorField("l2", DENSE, "L2", 2),
                                     VectorField("sparse_embedding", BM25, "BM25")))
HYBRID = ("embedding", "sparse_embedding")


def test_feedback_vector_moves_towards_the_mean_and_keeps_the_query_norm():
    q = [1.0, 0.0]
    moved = feedback_vector(q, [[0.0, 1.0], [0.0, 1.0]], 1.0)  # q + 1.0 * (0, 1) = (1, 1), rescaled to |q| = 1
    assert moved == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2)])
    half = feedback_vector([2.0, 0.0], [[0.0, 1.0], [0.0, 0.0]], 0.5)  # (2, 0.25) rescaled to norm 2
    assert half == pytest.approx([2 * 2 / math.hypot(2, 0.25), 2 * 0.25 / math.hypot(2, 0.25)])
    assert feedback_vector(q, [], 0.5) == q


def test_default_is_on_only_where_it_can_run():
    assert validate_feedback(None, SPEC, "hybrid", HYBRID, "weighted") == Feedback("embedding", 3, 0.5)
    assert validate_feedback(False, SPEC, "hybrid", HYBRID, "weighted") is None
    assert validate_feedback(None, SPEC, "hybrid", HYBRID, "rrf") is None
    assert validate_feedback(None, SPEC, "dense", ("embedding",), "rrf") is None
    assert validate_feedback(None, SPEC, "hybrid", ("l2", "sparse_embedding"), "weighted") is None
    assert validate_feedback(None, SPEC, "hybrid", ("embedding", "l2"), "weighted") is None
    assert validate_feedback({"docs": 5, "weight": 1}, SPEC, "hybrid", HYBRID, "weighted") == Feedback("embedding", 5, 1.0)


@pytest.mark.parametrize("value, fields, kind, message", [
    ({"docs": 3}, HYBRID, "rrf", "feedback runs on hybrid search with weighted fusion, got search_type 'hybrid' and fusion 'rrf'"),
    ({"docs": 3}, ("l2", "sparse_embedding"), "weighted", "feedback needs a dense field indexed with ['COSINE', 'IP'], 'l2' uses 'L2'"),
    ({"docs": 3}, ("embedding", "l2"), "weighted", "feedback needs exactly one dense field and a BM25 field among the searched ['embedding', 'l2']"),
    ({"docs": 0}, HYBRID, "weighted", "feedback docs must be an int >= 1, got 0"),
    ({"weight": 0.0}, HYBRID, "weighted", "feedback weight must be a number in (0, 10], got 0.0"),
    ({"beta": 0.5}, HYBRID, "weighted", "feedback accepts ['docs', 'weight'], got unknown ['beta']"),
    (True, HYBRID, "weighted", "feedback must be None (default), False (off) or a dict like {'docs': 3, 'weight': 0.5}, got True"),
])
def test_bad_feedback_is_named(value, fields, kind, message):
    with pytest.raises(ValueError) as err:
        validate_feedback(value, SPEC, "hybrid", fields, kind)
    assert str(err.value) == message
