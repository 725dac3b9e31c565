"""The no-LLM summary: names and numbers, most frequent first, under the cap."""

from __future__ import annotations

from llama_index_convrag.config.tokens import count_tokens
from llama_index_convrag.memory.salient import HEADER, salient_summary, salient_terms


def test_names_and_numbers_most_frequent_first() -> None:
    texts = ["We met Ana in Porto in 2019.", "Ana's sister lives in Porto. Then we left.", "I said hi to Ana."]
    assert salient_terms(texts) == ["Ana", "Porto", "2019"]  # "We", "Then", "I" open sentences or are "I"


def test_the_cap_holds() -> None:
    texts = [" ".join(f"Name{i}" for i in range(200))]
    text = salient_summary(["x " + texts[0]], 30, count_tokens)
    assert text.startswith(HEADER) and count_tokens(text) <= 30
    assert salient_summary(["nothing here"], 30, count_tokens) == ""
