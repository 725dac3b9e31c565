"""LLM rerank (listwise and pointwise) on the real model's replies: parsed, and the answering passage first."""

import pytest

from llama_index_convrag.postprocessors.scorers.llm import LLMScorer

pytestmark = pytest.mark.real_llm

QUERY = "How long should green tea steep?"
TEXTS = [
    "The Eiffel Tower in Paris was completed in 1889.",
    "Green tea should steep for two minutes in water at eighty degrees.",
    "BM25 is a bag-of-words ranking function used by search engines.",
]


@pytest.mark.parametrize("mode", ["listwise", "pointwise"])
def test_scores_parse_and_rank_the_answer_first(real_llm, mode: str) -> None:
    scores = LLMScorer(real_llm, mode=mode).score(QUERY, TEXTS)
    assert len(scores) == len(TEXTS) and all(0 <= s <= 10 for s in scores)
    assert max(range(len(TEXTS)), key=scores.__getitem__) == 1, scores
