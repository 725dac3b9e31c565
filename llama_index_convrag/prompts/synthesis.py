"""Default synthesis templates that core does not have: the citation variants, each core's template with our edits.

Without citations our synthesizers use LlamaIndex core's own defaults (``DEFAULT_TEXT_QA_PROMPT_SEL``,
``DEFAULT_REFINE_PROMPT_SEL``, ``DEFAULT_TREE_SUMMARIZE_PROMPT_SEL``, ``DEFAULT_SIMPLE_INPUT_PROMPT``), so
swapping core's factory for ours changes no prompt. With ``citations=True`` the chunks arrive numbered
``[1] ...`` and these templates ask the model to cite them.

A small model asked to cite numbered sources often answers with the numbers alone (``[1]``), whatever the wording;
the instruction shows the marker inside a whole sentence, marked as the format and not the answer, and says that a
number alone is no answer. An answer that is still only markers, or only the example repeated
(:data:`CITATION_EXAMPLE`), is not shown: the chat engine answers again without citations (``chat/fallback.py``).
The instruction asks for the language of the query (Chinese questions over Chinese passages).

``citation_mode="aligned"`` (the chat engine's default) asks with core's QA prompt and one rule added, to answer in
the query's language (:data:`ALIGNED_QA_PROMPT_SEL`): without it the 1.5B Qwen model answered 6 of 86 Chinese
questions over Chinese passages in English ("Tokyo, Japan", "Chelsea"); ``docs/results/answers.md``.
"""

from typing import Tuple

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate, SelectorPromptTemplate
from llama_index.core.prompts.chat_prompts import TEXT_QA_PROMPT_TMPL_MSGS, TEXT_QA_SYSTEM_PROMPT
from llama_index.core.prompts.default_prompts import (
    DEFAULT_REFINE_PROMPT_TMPL,
    DEFAULT_TEXT_QA_PROMPT_TMPL,
    DEFAULT_TREE_SUMMARIZE_TMPL,
)
from llama_index.core.prompts.prompt_type import PromptType
from llama_index.core.prompts.utils import is_chat_model

CITATION_EXAMPLE = "The bridge opened in 1932 [2]."
"""The format example of :data:`CITATION_INSTRUCTION` (an answer that only repeats it is no answer)."""

CITATION_INSTRUCTION = (
    "Write the answer as one or more complete sentences in the language of the query. "
    "End each sentence with the number of the source that supports it in square brackets "
    f"(the format, not the answer: \"{CITATION_EXAMPLE}\"). Never answer with a source number alone."
)


def edited(template: str, *edits: Tuple[str, str]) -> str:
    """``template`` (one of core's) with each ``(old, new)`` replaced once; raises naming an ``old`` it lacks, so a
    change of core's wording is caught by the tests instead of silently dropping our instruction."""
    for old, new in edits:
        if old not in template:
            raise RuntimeError(f"core's template no longer contains {old!r}: {template!r}")
        template = template.replace(old, new, 1)
    return template


NUMBERED = (("Context information is below.", "Context information is below, as numbered sources."),)
#: Core's QA template (its completion form), numbered sources and the citation instruction after its instruction.
CITATION_QA_TMPL = edited(DEFAULT_TEXT_QA_PROMPT_TMPL, *NUMBERED,
                          ("answer the query.\n", f"answer the query. {CITATION_INSTRUCTION}\n"))
CITATION_QA_PROMPT = PromptTemplate(CITATION_QA_TMPL, prompt_type=PromptType.QUESTION_ANSWER)

#: Core's refine template, asking to keep the citations, with the instruction.
CITATION_REFINE_TMPL = edited(
    DEFAULT_REFINE_PROMPT_TMPL,
    ("some more context below", "some more numbered sources below"),
    ("Given the new context,", "Given the new sources,"),
    ("answer the query. ", f"answer the query, keeping its citations. {CITATION_INSTRUCTION} "),
    ("If the context isn't useful", "If the sources aren't useful"),
)
CITATION_REFINE_PROMPT = PromptTemplate(CITATION_REFINE_TMPL, prompt_type=PromptType.REFINE)

#: Core's tree-summarize template with numbered sources, the instruction, and the sources' citations kept.
CITATION_TREE_SUMMARIZE_TMPL = edited(
    DEFAULT_TREE_SUMMARIZE_TMPL,
    ("multiple sources is below", "multiple numbered sources is below"),
    ("answer the query.\n",
     f"answer the query. {CITATION_INSTRUCTION} Keep the citations already present in the sources.\n"),
)
CITATION_TREE_SUMMARIZE_PROMPT = PromptTemplate(CITATION_TREE_SUMMARIZE_TMPL, prompt_type=PromptType.SUMMARY)


LANGUAGE_RULE = "Always answer in the language the query is written in."
"""The rule :data:`ALIGNED_QA_PROMPT_SEL` adds to core's QA prompt."""
#: Core's completion QA template with the rule after its instruction ("... answer the query.").
ALIGNED_QA_TMPL = edited(DEFAULT_TEXT_QA_PROMPT_TMPL, ("answer the query.\n", f"answer the query. {LANGUAGE_RULE}\n"))
ALIGNED_QA_SYSTEM = f"{TEXT_QA_SYSTEM_PROMPT.content}\n3. {LANGUAGE_RULE}"
"""Core's QA system prompt (its two rules) with :data:`LANGUAGE_RULE` as the third."""
ALIGNED_QA_PROMPT_SEL = SelectorPromptTemplate(
    default_template=PromptTemplate(ALIGNED_QA_TMPL, prompt_type=PromptType.QUESTION_ANSWER),
    conditionals=[(is_chat_model, ChatPromptTemplate(
        message_templates=[ChatMessage(role=MessageRole.SYSTEM, content=ALIGNED_QA_SYSTEM),
                           *TEXT_QA_PROMPT_TMPL_MSGS[1:]],
        prompt_type=PromptType.QUESTION_ANSWER))],
)
"""The QA prompt of ``citation_mode="aligned"``: core's ``DEFAULT_TEXT_QA_PROMPT_SEL`` (the chat form for chat models,
the completion form otherwise) with :data:`LANGUAGE_RULE`; no citation instruction (the answer is cited after)."""
