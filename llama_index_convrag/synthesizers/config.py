"""``SynthesizerConfig``: the factory's arguments, handed to each mode's ``from_config``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Type

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate

from llama_index_convrag.synthesizers.grounding import SupportScorer
from llama_index_convrag.synthesizers.packing import Tokenizer
from llama_index_convrag.synthesizers.structured import ProgramFactory

DEFAULT_EMPTY_RESPONSE = "Empty Response"


@dataclass
class SynthesizerConfig:
    """Everything :func:`get_response_synthesizer` was given; each mode's ``from_config`` takes what it uses."""

    llm: Optional[LLM] = None
    prompt_helper: Optional[PromptHelper] = None
    chat_prompt_helper: Optional[ChatPromptHelper] = None
    text_qa_template: Optional[BasePromptTemplate] = None
    refine_template: Optional[BasePromptTemplate] = None
    summary_template: Optional[BasePromptTemplate] = None
    simple_template: Optional[BasePromptTemplate] = None
    chat_content_qa_template: Optional[BasePromptTemplate] = None
    chat_content_refine_template: Optional[BasePromptTemplate] = None
    chat_summary_template: Optional[BasePromptTemplate] = None
    callback_manager: Optional[CallbackManager] = None
    use_async: bool = False
    streaming: bool = False
    structured_answer_filtering: bool = False
    output_cls: Optional[Type[BaseModel]] = None
    program_factory: Optional[ProgramFactory] = None
    verbose: bool = False
    multimodal: bool = False
    empty_response: str = DEFAULT_EMPTY_RESPONSE
    citations: bool = False
    citation_mode: str = "inline"
    early_stop: bool = False
    tokenizer: Optional[Tokenizer] = None
    embed_model: Optional[BaseEmbedding] = None
    support_scorer: Optional[SupportScorer] = None

    def common(self) -> Dict[str, Any]:
        """The keyword arguments every mode accepts."""
        return {
            "callback_manager": self.callback_manager,
            "prompt_helper": self.prompt_helper,
            "chat_prompt_helper": self.chat_prompt_helper,
            "multimodal": self.multimodal,
            "streaming": self.streaming,
            "output_cls": self.output_cls,
            "empty_response": self.empty_response,
            "citations": self.citations,
            "citation_mode": self.citation_mode,
            "verbose": self.verbose,
            "tokenizer": self.tokenizer,
            "use_async": self.use_async,
            "structured_answer_filtering": self.structured_answer_filtering,
            "program_factory": self.program_factory,
            "support_scorer": self.support_scorer,
        }
