"""LLM rerank (listwise and pointwise) on the real model's replies: parsed into one score per text.

Whether the answering passage comes first is the model's judgement, measured in bench/real_llm.py, not asserted:
Qwen2.5-0.5B listed "1" (the wrong passage) and rated all three passages 6.
"""

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
def test_replies_parse_into_one_score_per_text(real_llm, mode: str) -> None:
    scores = LLMScorer(real_llm, mode=mode).score(QUERY, TEXTS)  # raises ScorerError when nothing parses
    assert len(scores) == len(TEXTS) and all(0 <= s <= 10 for s in scores) and max(scores) > 0
