"""``SearchLimits``: how deep, how wide and how many LLM calls a judge-guided search may spend."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict
from llama_index_convrag.errors import ConfigurationError

DEFAULT_MAX_DEPTH = 2
DEFAULT_MAX_BRANCHING = 3
DEFAULT_MAX_LLM_CALLS = 40


@dataclass(frozen=True)
class SearchLimits:
    """``max_depth``: deepest sub-question level (0 = grade and filter only, never recurse); ``max_branching``:
    chunks graded 1 expanded per question (highest-ranked first); ``max_llm_calls``: judge calls plus sub-answer
    calls in one search (the final synthesis is not counted). Checked once, here."""

    max_depth: int = DEFAULT_MAX_DEPTH
    max_branching: int = DEFAULT_MAX_BRANCHING
    max_llm_calls: int = DEFAULT_MAX_LLM_CALLS

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_branching", "max_llm_calls"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be an integer >= 0, got {value!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)
