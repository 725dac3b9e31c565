from __future__ import annotations

import pytest

from llama_index_convrag.postprocessors import SimilarityThreshold
from llama_index_convrag.postprocessors.threshold import score_of
from llama_index_convrag.rank_trail import add_stage
from tests.postprocessors.conftest import ids, make_nodes


def trailed():
    nodes = make_nodes(["a", "b", "c", "d"], [0.04, 0.03, 0.02, 0.01])  # fused (RRF-like) final scores
    for nws, dense, rerank in zip(nodes, [0.8, 0.4, 0.7, None], [0.2, 0.9, None, 0.6]):
        if dense is not None:
            add_stage(nws, "dense", 1, dense)
        if rerank is not None:
            add_stage(nws, "rerank", 1, 0.0)
            add_stage(nws, "rerank", 1, rerank)  # the latest entry of a stage counts
    return nodes


def test_score_of_reads_final_or_latest_stage():
    nodes = trailed()
    assert score_of(nodes[0], "final") == 0.04
    assert score_of(nodes[0], "dense") == 0.8
    assert score_of(nodes[1], "rerank") == 0.9
    assert score_of(nodes[2], "rerank") is None


def test_final_score_threshold_keeps_order():
    out = SimilarityThreshold(0.025).postprocess_nodes(trailed())
    assert ids(out) == ["n0", "n1"]


@pytest.mark.parametrize(("on_missing", "expected"), [("keep", ["n0", "n2", "n3"]), ("drop", ["n0", "n2"])])
def test_stage_threshold_and_missing_policy(on_missing, expected):
    out = SimilarityThreshold(0.5, score_kind="dense", on_missing=on_missing).postprocess_nodes(trailed())
    assert ids(out) == expected


def test_missing_stage_raises_by_default_naming_the_node():
    with pytest.raises(ValueError, match=r"node 'n2' has no 'rerank' score \(trail stages: \['dense'\]\)"):
        SimilarityThreshold(0.5, score_kind="rerank").postprocess_nodes(trailed())


def test_distance_direction_and_min_keep():
    nodes = make_nodes(["a", "b", "c"], [0.3, 1.2, 0.9])
    assert ids(SimilarityThreshold(1.0, higher_is_better=False).postprocess_nodes(nodes)) == ["n0", "n2"]
    assert ids(SimilarityThreshold(5.0, min_keep=1).postprocess_nodes(nodes)) == ["n0"]


async def test_async_twin(events):
    out = await SimilarityThreshold(0.6, score_kind="rerank", on_missing="drop").apostprocess_nodes(trailed())
    assert ids(out) == ["n1", "n3"]
    end = [e for e in events if e.class_name() == "NodeSelectionEndEvent"][-1]
    assert (end.component, end.num_dropped) == ("SimilarityThreshold", 2)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [((float("nan"),), {}, "threshold must be a number, got nan"),
     ((0.5,), {"score_kind": ""}, "score_kind must be 'final' or a rank-trail stage name, got ''"),
     ((0.5,), {"on_missing": "ignore"}, "on_missing must be one of ['raise', 'keep', 'drop'], got 'ignore'"),
     ((0.5,), {"min_keep": -1}, "min_keep must be >= 0, got -1")],
)
def test_validation(args, kwargs, message):
    with pytest.raises(ValueError) as info:
        SimilarityThreshold(*args, **kwargs)
    assert str(info.value) == message
