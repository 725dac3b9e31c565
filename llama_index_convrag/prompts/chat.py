"""Default prompt templates of the chat engine.

Where the engine asks what LlamaIndex core's chat engines ask, the template is core's own, imported from core (so a
conversation sends core's exact prompts, and a core upgrade that changes them changes ours): the context prompts of
``condense_plus_context`` and of ``context``. Our condense prompt is core's ``CondenseQuestionChatEngine`` prompt with
one sentence added to its instruction; the other templates here are ours.
"""

from llama_index.core.chat_engine.condense_plus_context import (
    DEFAULT_CONTEXT_PROMPT_TEMPLATE as CORE_CONDENSE_PLUS_CONTEXT_TEMPLATE,
)
from llama_index.core.chat_engine.condense_plus_context import (
    DEFAULT_CONTEXT_REFINE_PROMPT_TEMPLATE as CORE_CONDENSE_PLUS_CONTEXT_REFINE_TEMPLATE,
)
from llama_index.core.chat_engine.condense_question import DEFAULT_TEMPLATE as CORE_CONDENSE_QUESTION_TEMPLATE
from llama_index.core.chat_engine.context import DEFAULT_CONTEXT_TEMPLATE as CORE_CONTEXT_TEMPLATE
from llama_index.core.chat_engine.context import DEFAULT_REFINE_TEMPLATE as CORE_CONTEXT_REFINE_TEMPLATE
from llama_index.core.prompts import PromptTemplate

REPLY_RULE = "Reply with the question only."
"""The sentence our condense prompt adds to core's instruction: small models otherwise wrap the question in prose."""


def with_rule(template: str, rule: str) -> str:
    """``template`` with ``rule`` appended to its first paragraph (the instruction), as one more sentence."""
    head, sep, rest = template.partition("\n\n")
    return f"{head} {rule}{sep}{rest}"


DEFAULT_CONDENSE_TEMPLATE = with_rule(CORE_CONDENSE_QUESTION_TEMPLATE, REPLY_RULE)
"""Condense prompt of the ``llm`` rewrite strategy: core's ``CondenseQuestionChatEngine`` prompt plus
:data:`REPLY_RULE`."""

DEFAULT_CONDENSE_PROMPT = PromptTemplate(DEFAULT_CONDENSE_TEMPLATE)

CORE_CONDENSE_QUESTION_PROMPT = PromptTemplate(CORE_CONDENSE_QUESTION_TEMPLATE)
"""Core's ``CondenseQuestionChatEngine`` prompt as it is (the default of the drop-in class of that name)."""

DEFAULT_ANSWER_QUERY_TEMPLATE = """\
Conversation so far:
{chat_history}

Question: {question}"""
"""What the synthesizer sees as the query when ``rephrase_question=False`` and there is history."""

DEFAULT_ANSWER_QUERY_PROMPT = PromptTemplate(DEFAULT_ANSWER_QUERY_TEMPLATE)

DEFAULT_NO_DOCS_REPLY = "I could not find anything relevant in the documents to answer that."

DEFAULT_CONTEXT_TEMPLATE = CORE_CONDENSE_PLUS_CONTEXT_TEMPLATE
"""System text of ``condense_plus_context`` answers (core's ``CondensePlusContextChatEngine`` default):
``{context_str}`` is filled with the retrieved chunks, the system prompt follows it."""

DEFAULT_CONTEXT_PROMPT = PromptTemplate(DEFAULT_CONTEXT_TEMPLATE)

DEFAULT_CONTEXT_REFINE_TEMPLATE = CORE_CONDENSE_PLUS_CONTEXT_REFINE_TEMPLATE
"""Refine counterpart of :data:`DEFAULT_CONTEXT_TEMPLATE` (when the context spans several LLM calls)."""

DEFAULT_CONTEXT_REFINE_PROMPT = PromptTemplate(DEFAULT_CONTEXT_REFINE_TEMPLATE)

CONTEXT_MODE_PROMPT = PromptTemplate(CORE_CONTEXT_TEMPLATE)
"""System text of ``context`` answers (core's ``ContextChatEngine`` default)."""

CONTEXT_MODE_REFINE_PROMPT = PromptTemplate(CORE_CONTEXT_REFINE_TEMPLATE)
"""Refine counterpart of :data:`CONTEXT_MODE_PROMPT`."""
