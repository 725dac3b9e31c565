from __future__ import annotations

import pytest

from llama_index_convrag.postprocessors.scorers.base import ScorerError, check_scores
from tests.postprocessors.conftest import TableScorer


def test_check_scores_accepts_and_converts():
    assert check_scores([1, 2.5], 2, "s") == [1.0, 2.5]


@pytest.mark.parametrize(("scores", "message"), [([1.0], "scorer 's' returned 1 scores for 2 texts"),
                                                 ([1.0, float("nan")], "non-finite scores at positions [1]")])
def test_check_scores_rejects(scores, message):
    with pytest.raises(ScorerError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_scores(scores, 2, "s")


async def test_default_ascore_runs_score():
    scorer = TableScorer({"a": 0.5})
    assert await scorer.ascore("q", ["a"]) == [0.5]
    assert scorer.calls == [("q", ["a"])]
