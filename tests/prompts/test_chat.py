"""The chat engine's default prompts: core's own where the engine asks what core asks, ours where it adds a rule."""

import pytest
from llama_index.core.chat_engine import condense_plus_context, condense_question, context

from llama_index_convrag.chat.context_chat import MODE_PROMPTS
from llama_index_convrag.prompts import chat
from llama_index_convrag.prompts.synthesis import edited


def test_context_prompts_are_cores_objects_for_each_mode():
    cpc, cpc_refine = MODE_PROMPTS["condense_plus_context"]
    ctx, ctx_refine = MODE_PROMPTS["context"]
    assert cpc.get_template() is condense_plus_context.DEFAULT_CONTEXT_PROMPT_TEMPLATE
    assert cpc_refine.get_template() is condense_plus_context.DEFAULT_CONTEXT_REFINE_PROMPT_TEMPLATE
    assert ctx.get_template() is context.DEFAULT_CONTEXT_TEMPLATE
    assert ctx_refine.get_template() is context.DEFAULT_REFINE_TEMPLATE


def test_condense_prompt_is_cores_with_the_reply_rule_ending_its_instruction():
    core = condense_question.DEFAULT_TEMPLATE
    first, rest = core.split("\n\n", 1)
    assert chat.DEFAULT_CONDENSE_TEMPLATE == f"{first} {chat.REPLY_RULE}\n\n{rest}"
    assert chat.CORE_CONDENSE_QUESTION_PROMPT.get_template() is core
    assert chat.DEFAULT_CONDENSE_PROMPT.template_vars == ["chat_history", "question"]


def test_with_rule_on_a_one_paragraph_template():
    assert chat.with_rule("Rewrite {question}.", "Be brief.") == "Rewrite {question}. Be brief."


def test_edited_names_the_missing_anchor():
    assert edited("a b c", ("b", "B")) == "a B c"
    with pytest.raises(RuntimeError, match=r"no longer contains 'z'"):
        edited("a b c", ("z", "Z"))
