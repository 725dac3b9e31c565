from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.schema import QueryBundle

from llama_index_convrag.postprocessors import MMRPostprocessor, mmr_select
from llama_index_convrag.rank_trail import get_trail
from tests.postprocessors.conftest import ids, make_nodes

REL = [0.9, 0.85, 0.5]
SIMS = [[1.0, 0.95, 0.1], [0.95, 1.0, 0.2], [0.1, 0.2, 1.0]]


@pytest.mark.parametrize(
    ("lambda_mult", "expected"),
    [(1.0, [(0, 0.9), (1, 0.85), (2, 0.5)]),
     (0.5, [(0, 0.45), (2, 0.2), (1, -0.05)]),
     (0.0, [(0, 0.0), (2, -0.1), (1, -0.95)])],
)
def test_mmr_select_order_on_hand_built_similarities(lambda_mult, expected):
    got = mmr_select(REL, SIMS, lambda_mult, None)
    assert [i for i, _ in got] == [i for i, _ in expected]
    assert [v for _, v in got] == pytest.approx([v for _, v in expected])


def test_mmr_select_top_n_and_ties_go_to_earlier_index():
    assert mmr_select([0.5, 0.5], [[1, 0], [0, 1]], 0.7, 1) == [(0, pytest.approx(0.35))]


# unit vectors: n1 nearly duplicates n0; n2 is off to the side but still relevant
VECS = [[1.0, 0.0, 0.0], [0.995, 0.0998, 0.0], [0.6, 0.0, 0.8]]


def test_postprocessor_uses_stored_embeddings_and_keeps_scores(events):
    nodes = make_nodes(["a", "b", "c"], [0.9, 0.8, 0.7], embeddings=VECS)
    q = np.array([0.9, 0.0, 0.436])
    out = MMRPostprocessor(lambda_mult=0.5, top_n=2).postprocess_nodes(nodes, QueryBundle("q", embedding=list(q)))
    assert ids(out) == ["n0", "n2"]  # relevance alone would put the near-duplicate n1 second
    assert [n.score for n in out] == [0.9, 0.7]
    trail = get_trail(out[1])[-1]
    assert (trail["stage"], trail["rank"], trail["prev_rank"], trail["lambda_mult"]) == ("mmr", 2, 3, 0.5)
    rel2 = float(np.asarray(VECS[2]) @ q / np.linalg.norm(q))
    assert trail["score"] == pytest.approx(0.5 * rel2 - 0.5 * 0.6)
    assert [e.class_name() for e in events if e.class_name().startswith("NodeSelection")] == [
        "NodeSelectionStartEvent", "NodeSelectionEndEvent"]


async def test_async_twin_computes_missing_embeddings(embed_model):
    texts = ["Photosynthesis converts light into chemical energy in chloroplasts.",
             "In chloroplasts, photosynthesis turns light into chemical energy.",
             "Plants take up water and minerals through their roots."]
    query = QueryBundle("How do plants get energy and nutrients?")
    pp = MMRPostprocessor(embed_model=embed_model, lambda_mult=0.3, top_n=2)
    sync = pp.postprocess_nodes(make_nodes(texts), query)
    asyn = await pp.apostprocess_nodes(make_nodes(texts), query)
    assert ids(sync) == ids(asyn)
    assert {"n0", "n1"} - set(ids(sync)) and "n2" in ids(sync)  # the near-duplicate pair is split


def test_missing_embeddings_without_model_is_a_clear_error():
    with pytest.raises(ValueError, match="2 of 2 nodes carry no embedding and no embed_model was given"):
        MMRPostprocessor().postprocess_nodes(make_nodes(["a", "b"]), QueryBundle("q", embedding=[1.0, 0.0]))
    with pytest.raises(ValueError, match="the query bundle carries no embedding"):
        MMRPostprocessor().postprocess_nodes(make_nodes(["a"], embeddings=[[1.0]]), QueryBundle("q"))
    with pytest.raises(ValueError, match="MMRPostprocessor needs the query"):
        MMRPostprocessor().postprocess_nodes(make_nodes(["a"], embeddings=[[1.0]]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"lambda_mult": 1.5}, "lambda_mult must be in [0, 1], got 1.5"),
     ({"lambda_mult": -0.1}, "lambda_mult must be in [0, 1], got -0.1"),
     ({"top_n": 0}, "top_n must be >= 1 or None (keep all), got 0")],
)
def test_validation(kwargs, message):
    with pytest.raises(ValueError) as info:
        MMRPostprocessor(**kwargs)
    assert str(info.value) == message
