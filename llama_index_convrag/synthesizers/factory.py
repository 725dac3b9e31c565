"""``get_response_synthesizer``: core's signature and defaults, backed by the mode registry.

Settings (one rule with the chat engine, ``resolve.py``): an argument passed wins; else a value assigned on
``Settings`` (``Settings.llm``, ``Settings.prompt_helper``, ``Settings.chat_prompt_helper``) is used; else prompt
helpers come from the LLM's metadata (as core) and a mode that calls an LLM raises a ``ValueError`` saying how to pass
one. Core's factory calls the ``Settings.llm`` getter, which silently builds a default OpenAI client; we never do.
``no_text`` and ``context_only`` need no LLM at all.
"""

from __future__ import annotations

from typing import Callable, Optional, Type, Union

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.types import BasePydanticProgram

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.synthesizers.base import BaseSynthesizer
from llama_index_convrag.synthesizers.citations import check_citation_mode
from llama_index_convrag.synthesizers.config import DEFAULT_EMPTY_RESPONSE, SynthesizerConfig
from llama_index_convrag.synthesizers.grounding import SupportScorer
from llama_index_convrag.synthesizers.packing import Tokenizer
from llama_index_convrag.synthesizers.registry import lookup_mode, registered_modes
from llama_index_convrag.synthesizers.resolve import require_llm
from llama_index_convrag.synthesizers.types import ResponseMode


def _modes_where(flag: str) -> list:
    return [m for m in registered_modes() if getattr(lookup_mode(m), flag)]


def get_response_synthesizer(
    llm: Optional[LLM] = None,
    prompt_helper: Optional[PromptHelper] = None,
    chat_prompt_helper: Optional[ChatPromptHelper] = None,
    text_qa_template: Optional[BasePromptTemplate] = None,
    refine_template: Optional[BasePromptTemplate] = None,
    summary_template: Optional[BasePromptTemplate] = None,
    simple_template: Optional[BasePromptTemplate] = None,
    chat_content_qa_template: Optional[BasePromptTemplate] = None,
    chat_content_refine_template: Optional[BasePromptTemplate] = None,
    chat_summary_template: Optional[BasePromptTemplate] = None,
    response_mode: Union[ResponseMode, str] = ResponseMode.COMPACT,
    callback_manager: Optional[CallbackManager] = None,
    use_async: bool = False,
    streaming: bool = False,
    structured_answer_filtering: bool = False,
    output_cls: Optional[Type[BaseModel]] = None,
    program_factory: Optional[Callable[[BasePromptTemplate], BasePydanticProgram]] = None,
    verbose: bool = False,
    multimodal: bool = False,
    *,
    empty_response: str = DEFAULT_EMPTY_RESPONSE,
    citations: bool = False,
    citation_mode: str = "inline",
    early_stop: bool = False,
    tokenizer: Optional[Tokenizer] = None,
    embed_model: Optional[BaseEmbedding] = None,
    support_scorer: Optional[SupportScorer] = None,
) -> BaseSynthesizer:
    """A response synthesizer for ``response_mode`` (a drop-in for core's factory).

    Our additions (keyword-only): ``empty_response`` (answer when there are no nodes), ``citations`` (number chunks
    ``[n]`` and map the answer's markers to ``response.metadata["citations"]``), ``citation_mode`` (how
    ``citations`` cites: ``"inline"``, the LLM writes the markers; ``"aligned"``, the LLM answers with the plain
    templates and each answer sentence is then cited with the passage that supports it, no extra call),
    ``early_stop`` (refine family: stop once the answer is final, see ``refine.py``), ``tokenizer`` (packing and prompt-token counting; default
    tiktoken's gpt-3.5 encoding, as core), ``embed_model`` (the ``extractive`` mode's sentence scorer; default the
    local MiniLM model), ``support_scorer`` (``citation_mode="aligned"``: a model that scores how well each passage
    supports an answer sentence, instead of the lexical check; ``synthesizers.grounding.SupportScorer``).
    """
    check_citation_mode(citation_mode)
    cls = lookup_mode(response_mode)
    mode = cls.mode if cls.mode != "custom" else str(getattr(response_mode, "value", response_mode))
    if structured_answer_filtering and not cls.supports_structured_filtering:
        raise ConfigurationError(
            f"structured_answer_filtering is supported by {_modes_where('supports_structured_filtering')}, "
            f"not {mode!r}"
        )
    if early_stop and not cls.supports_early_stop:
        raise ConfigurationError(f"early_stop is supported by {_modes_where('supports_early_stop')}, not {mode!r}")
    if embed_model is not None and not cls.uses_embed_model:
        raise ConfigurationError(f"embed_model is used by {_modes_where('uses_embed_model')}, not {mode!r}")
    if cls.requires_llm and program_factory is None:
        llm = require_llm(llm, f"response_mode {mode!r}")
    config = SynthesizerConfig(
        llm=llm,
        prompt_helper=prompt_helper,
        chat_prompt_helper=chat_prompt_helper,
        text_qa_template=text_qa_template,
        refine_template=refine_template,
        summary_template=summary_template,
        simple_template=simple_template,
        chat_content_qa_template=chat_content_qa_template,
        chat_content_refine_template=chat_content_refine_template,
        chat_summary_template=chat_summary_template,
        callback_manager=callback_manager,
        use_async=use_async,
        streaming=streaming,
        structured_answer_filtering=structured_answer_filtering,
        output_cls=output_cls,
        program_factory=program_factory,
        verbose=verbose,
        multimodal=multimodal,
        empty_response=empty_response,
        citations=citations,
        citation_mode=citation_mode,
        early_stop=early_stop,
        support_scorer=support_scorer,
        tokenizer=tokenizer,
        embed_model=embed_model,
    )
    return cls.from_config(config)
