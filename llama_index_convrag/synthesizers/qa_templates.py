"""The question-answering prompt pair shared by the one-prompt modes (simple_summarize, accumulate): the text
template and its message-content twin for ``multimodal=True``, kept in named attributes as core keeps them."""

from __future__ import annotations

from typing import ClassVar, Dict

from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.chat_prompts import CHAT_CONTENT_QA_PROMPT
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TEXT_QA_PROMPT_SEL

from llama_index_convrag.prompts.synthesis import ALIGNED_QA_PROMPT_SEL, CITATION_QA_PROMPT
from llama_index_convrag.synthesizers.base import BaseSynthesizer, TemplateDefaults


class QATemplates(BaseSynthesizer):
    """A mode whose calls all use the QA prompt."""

    template_defaults: ClassVar[TemplateDefaults] = {
        "text_qa_template": (DEFAULT_TEXT_QA_PROMPT_SEL, CITATION_QA_PROMPT),
        "chat_content_qa_template": (CHAT_CONTENT_QA_PROMPT, CHAT_CONTENT_QA_PROMPT),
    }
    aligned_defaults: ClassVar[Dict[str, BasePromptTemplate]] = {"text_qa_template": ALIGNED_QA_PROMPT_SEL}
    _text_qa_template: BasePromptTemplate
    _chat_content_qa_template: BasePromptTemplate

    @property
    def _qa(self) -> BasePromptTemplate:
        """The QA template of this medium."""
        return self._pick(self._text_qa_template, self._chat_content_qa_template)
