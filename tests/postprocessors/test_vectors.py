from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.schema import QueryBundle

from llama_index_convrag.postprocessors._vectors import anode_vectors, node_vectors, query_vector, unit_rows
from tests.postprocessors.scorers.test_embedding import CountingEmbedding
from tests.postprocessors.conftest import make_nodes


def test_unit_rows_keeps_zero_rows():
    assert unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist() == [[0.6, 0.8], [0.0, 0.0]]


async def test_only_missing_embeddings_are_computed(embed_model):
    counting = CountingEmbedding(embed_model)
    nodes = make_nodes(["stored", "computed"])
    nodes[0].node.embedding = [2.0] + [0.0] * 383
    vecs = node_vectors(nodes, counting)
    assert counting.embedded == ["computed"]
    assert vecs[0, 0] == 1.0 and vecs[1] @ vecs[1] == pytest.approx(1.0)
    again = await anode_vectors(nodes, counting)
    assert np.allclose(again, vecs) and counting.embedded == ["computed", "computed"]


def test_query_vector_prefers_the_bundle_embedding(embed_model):
    counting = CountingEmbedding(embed_model)
    assert query_vector(QueryBundle("q", embedding=[0.0, 2.0]), counting, "X").tolist() == [0.0, 1.0]
    assert query_vector(QueryBundle("hello"), embed_model, "X").shape == (384,)
