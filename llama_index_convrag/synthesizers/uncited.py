"""A synthesizer's twin that answers without the citation instruction, for the chat engine's one retry of an answer
that came back empty or as citation markers only."""

from __future__ import annotations

import copy
from typing import Any, Optional

from llama_index_convrag.synthesizers.base import BaseSynthesizer


def without_citations(synthesizer: Any) -> Optional[BaseSynthesizer]:
    """A copy of ``synthesizer`` (one of ours that calls an LLM) that does not number the chunks, uses the
    ``citation_mode="aligned"`` default (the plain one, or core's QA prompt answering in the query's language) of every
    template still at its citation default (a template the caller gave is kept) and does not stream; None for anything else (another synthesizer, a mode without an LLM call). The copy shares the LLM and
    every other part; the original is unchanged."""
    if not isinstance(synthesizer, BaseSynthesizer) or not synthesizer.requires_llm:
        return None
    twin = copy.copy(synthesizer)
    twin._citations = False
    twin._aligned = False  # the caller cites the retry's answer itself
    twin._streaming = False
    current = synthesizer._get_prompts()
    twin._update_prompts({role: synthesizer.aligned_defaults.get(role, plain)
                          for role, (plain, cited) in synthesizer.template_defaults.items() if current.get(role) is cited})
    return twin


__all__ = ["without_citations"]
