"""What a mode asks the drivers for (``CallRequest``, ``EmbedRequest``), the per-call ledger (``RunState``), template variables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Generator, List, Union

from llama_index.core.prompts import BasePromptTemplate, SelectorPromptTemplate

KNOWN_VARIABLES = frozenset({"query_str", "context_str", "context_msg", "existing_answer", "context_messages"})


@dataclass
class CallRequest:
    """One LLM call a mode wants: the template, its full variables, and how to run it."""

    template: BasePromptTemplate
    kwargs: Dict[str, Any]
    structured: bool = False
    stream: bool = False
    consume: bool = False  # with stream: collect the streamed text (an intermediate step of a streaming run)


@dataclass
class RunState:
    """Per-call ledger (a synthesizer may serve concurrent requests, so nothing lives on ``self``)."""

    query_str: str
    extras: Dict[str, Any]
    llm_calls: int = 0
    prompt_tokens: int = 0
    llm_calls_saved: int = 0
    skipped_chunks: List[Dict[str, Any]] = field(default_factory=list)
    options: Dict[str, Any] = field(default_factory=dict)  # per-call mode options (accumulate's ``separator``)

    def fill(self, **context: Any) -> Dict[str, Any]:
        """Every variable of a call: the query, the extras, and this call's context."""
        return {"query_str": self.query_str, **self.extras, **context}


@dataclass
class EmbedRequest:
    """Embeddings a mode wants (the ``extractive`` mode): the query's and each text's."""

    query: str
    texts: List[str]


Request = Union[CallRequest, List[CallRequest], EmbedRequest]
Steps = Generator[Request, Any, Any]


def template_variables(template: BasePromptTemplate) -> List[str]:
    """Variables still to fill in ``template`` (every branch of a selector)."""
    templates: List[BasePromptTemplate] = [template]
    if isinstance(template, SelectorPromptTemplate):
        templates = [template.default_template, *(t for _, t in template.conditionals or [])]
    names: List[str] = []
    for t in templates:
        mapped = set((t.function_mappings or {}).keys())
        for name in t.template_vars:
            if name not in t.kwargs and name not in mapped and name not in names:
                names.append(name)
    return names
