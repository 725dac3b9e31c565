"""How the collaborators of a synthesizer or chat engine are resolved without hidden defaults.

One rule for the factory, the synthesizer classes, ``ConvRAGChatEngine.from_defaults`` and the index's
``as_query_engine`` / ``as_chat_engine``: an argument you pass wins; else a value assigned on ``Settings``
(``Settings.llm = ...``, ``Settings.prompt_helper = ...``, ``Settings.chat_prompt_helper = ...``) is configuration
and is used, as core uses it; else nothing is built behind your back. Core's ``Settings.llm`` *getter* is never
called: with nothing assigned it builds a default OpenAI client (``MockLLM`` under ``IS_TESTING``). Prompt helpers
not given nor assigned are built from the LLM's metadata, as core builds them.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import llama_index.core

from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper
from llama_index.core.llms import LLM, CustomLLM
from llama_index.core.settings import Settings

from llama_index_convrag.config.llm import configured_llm
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.synthesizers.packing import TiktokenTokenizer, Tokenizer


def require_llm(llm: Optional[LLM], what: str) -> LLM:
    """:func:`configured_llm`, or a ``ValueError`` naming ``what`` needs it and how to give it."""
    llm = configured_llm(llm)
    if llm is None:
        raise ConfigurationError(
            f"{what} needs an LLM: pass llm=... or assign llama_index.core.Settings.llm (for example "
            "llama_index_convrag.config.resolve_llm(base_url=..., model=...)); no default OpenAI client is built"
        )
    return llm


def helper_tokenizer(tokenizer: Optional[Tokenizer]) -> Callable[[str], List[int]]:
    """What a prompt helper built here counts with: the synthesizer's ``tokenizer``; else the tokenizer assigned to
    ``Settings.tokenizer`` (core's global), as core would use it; else, and when that global is core's own default
    (tiktoken's gpt-3.5-turbo encoding, all special tokens allowed), the cached :class:`TiktokenTokenizer`: the same
    token ids, but a chunk retrieved again on a later turn is not encoded again."""
    if tokenizer is not None:
        return tokenizer.encode
    assigned = llama_index.core.global_tokenizer
    default = TiktokenTokenizer()
    if assigned is None or default.is_same_encoding(assigned):
        return default.encode
    return assigned


def resolve_prompt_helpers(
    llm: Optional[LLM],
    prompt_helper: Optional[PromptHelper],
    chat_prompt_helper: Optional[ChatPromptHelper],
    tokenizer: Optional[Callable[[str], List]] = None,
) -> Tuple[PromptHelper, ChatPromptHelper]:
    """``(prompt_helper, chat_prompt_helper)``: given, else explicitly set on Settings, else from ``llm``; a text
    helper built here counts with ``tokenizer`` when one is given (the synthesizer's ``tokenizer=``)."""
    if prompt_helper is None:
        prompt_helper = Settings._prompt_helper
    if prompt_helper is None:
        prompt_helper = (
            PromptHelper.from_llm_metadata(llm.metadata, tokenizer=tokenizer)
            if llm is not None
            else PromptHelper(tokenizer=tokenizer)
        )
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
