"""How a synthesizer's collaborators are resolved without hidden defaults.

Prompt helpers, as core resolves them: the one passed, else the one the user set explicitly on ``Settings``
(``Settings._prompt_helper`` / ``Settings._chat_prompt_helper``: configuration, not a fallback), else one built from
the LLM's metadata, else core's defaults (modes without an LLM). ``Settings.llm`` is never read: core's getter builds
a default OpenAI client.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper
from llama_index.core.llms import LLM, CustomLLM
from llama_index.core.settings import Settings


def resolve_prompt_helpers(
    llm: Optional[LLM], prompt_helper: Optional[PromptHelper], chat_prompt_helper: Optional[ChatPromptHelper]
) -> Tuple[PromptHelper, ChatPromptHelper]:
    """``(prompt_helper, chat_prompt_helper)``: given, else explicitly set on Settings, else from ``llm``."""
    if prompt_helper is None:
        prompt_helper = Settings._prompt_helper
    if prompt_helper is None:
        prompt_helper = PromptHelper.from_llm_metadata(llm.metadata) if llm is not None else PromptHelper()
    if chat_prompt_helper is None:
        chat_prompt_helper = Settings._chat_prompt_helper
    if chat_prompt_helper is None:
        chat_prompt_helper = (
            ChatPromptHelper.from_llm_metadata(llm.metadata) if llm is not None else ChatPromptHelper()
        )
    return prompt_helper, chat_prompt_helper


class NoLLM(CustomLLM):
    """Stands in for the LLM of a mode that calls none (core's ``__init__`` would read ``Settings.llm``); any call
    raises."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="no-llm")

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise RuntimeError("this synthesizer calls no LLM; pass llm=... to a mode that does")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        raise RuntimeError("this synthesizer calls no LLM; pass llm=... to a mode that does")
