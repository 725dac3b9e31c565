"""MemoryOptions and its parts: defaults, and every bad value named with what is accepted."""

from __future__ import annotations

import pytest

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.options import EpisodicOptions, FactsOptions, MemoryOptions, SummaryOptions


def test_defaults_turn_recall_and_summary_on_and_facts_off() -> None:
    o = MemoryOptions()
    assert (o.episodic.enabled, o.summary.enabled, o.facts.enabled) == (True, True, False)
    assert (o.episodic.k, o.episodic.window, o.summary.max_tokens, o.summary.no_llm) == (10, 6, 400, "none")
    assert o.writers == 4
    off = MemoryOptions.off()
    assert not (off.episodic.enabled or off.summary.enabled or off.facts.enabled)


@pytest.mark.parametrize("make,message", [
    (lambda: EpisodicOptions(k=0), "EpisodicOptions.k must be an int >= 1, got 0"),
    (lambda: EpisodicOptions(enabled="yes"), "EpisodicOptions.enabled must be True or False, got 'yes'"),
    (lambda: EpisodicOptions(rules={}), "EpisodicOptions.rules must be a RecallRules, got dict"),
    (lambda: EpisodicOptions(cached_rows=-1), "EpisodicOptions.cached_rows must be an int >= 0, got -1"),
    (lambda: EpisodicOptions(word_table="off"), "EpisodicOptions.word_table must be True or False, got 'off'"),
    (lambda: SummaryOptions(max_tokens=8), "SummaryOptions.max_tokens must be an int >= 16, got 8"),
    (lambda: SummaryOptions(no_llm="keywords"),
     r"SummaryOptions.no_llm must be one of \['none', 'salient'\], got 'keywords'"),
    (lambda: SummaryOptions(llm="gpt"), "SummaryOptions.llm must be a LlamaIndex LLM or None, got str"),
    (lambda: FactsOptions(min_similarity=2), r"FactsOptions.min_similarity must be a number in \[-1, 1\], got 2"),
    (lambda: FactsOptions(min_similarity=0.8, duplicate_similarity=0.7),
     r"FactsOptions.duplicate_similarity \(0.7\) must be >= min_similarity \(0.8\)"),
    (lambda: MemoryOptions(facts=True), "MemoryOptions.facts must be a FactsOptions, got bool"),
    (lambda: MemoryOptions(writers=0), "MemoryOptions.writers must be an int >= 1, got 0"),
])
def test_bad_values_are_named(make, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make()
