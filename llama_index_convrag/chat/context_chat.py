"""Answers of the ``condense_plus_context`` and ``context`` chat modes: the LLM sees a system message (the context
prompt filled with the retrieved chunks, then the system prompt), the conversation as messages, then the user's own
words. :class:`ContextChat` builds that turn's synthesizer (ours, any response mode) from the history the budget
kept; the layout and the default templates are core's (``CondensePlusContextChatEngine`` for
``condense_plus_context``, ``ContextChatEngine`` for ``context``: :data:`MODE_PROMPTS`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import BasePromptTemplate, ChatPromptTemplate, PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.prompts.chat import (
    CONTEXT_MODE_PROMPT,
    CONTEXT_MODE_REFINE_PROMPT,
    DEFAULT_CONTEXT_PROMPT,
    DEFAULT_CONTEXT_REFINE_PROMPT,
)
from llama_index_convrag.synthesizers import BaseSynthesizer, get_response_synthesizer

PromptLike = Union[str, BasePromptTemplate]

MODE_PROMPTS: Dict[str, Tuple[BasePromptTemplate, BasePromptTemplate]] = {
    "condense_plus_context": (DEFAULT_CONTEXT_PROMPT, DEFAULT_CONTEXT_REFINE_PROMPT),
    "context": (CONTEXT_MODE_PROMPT, CONTEXT_MODE_REFINE_PROMPT),
}
"""The default ``(context_prompt, context_refine_prompt)`` of each context chat mode: core's defaults for that mode."""


def as_template(prompt: Optional[PromptLike], default: PromptTemplate) -> BasePromptTemplate:
    return default if prompt is None else PromptTemplate(prompt) if isinstance(prompt, str) else prompt


def chat_messages(context_prompt: BasePromptTemplate, system_prompt: str, history: Sequence[ChatMessage],
                  system_role: MessageRole, prefix: Sequence[ChatMessage] = ()) -> List[ChatMessage]:
    """``[system: context template + system prompt, *prefix, *history, user: {query_str}]`` (pure; core's layout)."""
    system = context_prompt.get_template() + system_prompt.strip()
    return [ChatMessage(role=system_role, content=system), *prefix, *history,
            ChatMessage(role=MessageRole.USER, content="{query_str}")]


class ContextChat(PromptMixin):
    """Builds the per-turn synthesizer of a context chat mode. ``synth_kwargs`` go to ``get_response_synthesizer``;
    ``prefix_messages`` (core's ``ContextChatEngine``) sit between the system message and the conversation."""

    def __init__(self, llm: LLM, *, mode: str = "condense_plus_context", system_prompt: Optional[str] = None,
                 context_prompt: Optional[PromptLike] = None, context_refine_prompt: Optional[PromptLike] = None,
                 prefix_messages: Sequence[ChatMessage] = (),
                 synth_kwargs: Optional[Dict[str, Any]] = None) -> None:
        if mode not in MODE_PROMPTS:
            raise ConfigurationError(f"mode must be one of {sorted(MODE_PROMPTS)}, got {mode!r}")
        self._llm = llm
        self.system_prompt = system_prompt if system_prompt is not None else ""
        self.prefix_messages = list(prefix_messages)
        default, default_refine = MODE_PROMPTS[mode]
        self._context_prompt = as_template(context_prompt, default)
        self._context_refine_prompt = as_template(context_refine_prompt, default_refine)
        self._synth_kwargs = dict(synth_kwargs) if synth_kwargs is not None else {}
        taken = sorted({"text_qa_template", "refine_template"} & set(self._synth_kwargs))
        if taken:
            raise ConfigurationError(f"context chat modes build {taken} from context_prompt / context_refine_prompt / "
                             "system_prompt; pass those instead")

    def _get_prompts(self) -> PromptDictType:
        return {"context_prompt": self._context_prompt, "context_refine_prompt": self._context_refine_prompt}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "context_prompt" in prompts_dict:
            self._context_prompt = prompts_dict["context_prompt"]
        if "context_refine_prompt" in prompts_dict:
            self._context_refine_prompt = prompts_dict["context_refine_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def system_text(self) -> str:
        """The fixed text of every answer prompt (what the budget reserves besides history, chunks, question)."""
        fixed = self._context_prompt.get_template().replace("{context_str}", "") + self.system_prompt.strip()
        return "\n".join([fixed, *(str(m.content) for m in self.prefix_messages)])

    def synthesizer(self, history: Sequence[ChatMessage], *, streaming: bool) -> BaseSynthesizer:
        role = self._llm.metadata.system_role
        qa = chat_messages(self._context_prompt, self.system_prompt, history, role, self.prefix_messages)
        refine = chat_messages(self._context_refine_prompt, self.system_prompt, history, role, self.prefix_messages)
        return get_response_synthesizer(
            llm=self._llm, streaming=streaming, text_qa_template=ChatPromptTemplate.from_messages(qa),
            refine_template=ChatPromptTemplate.from_messages(refine), **self._synth_kwargs)
