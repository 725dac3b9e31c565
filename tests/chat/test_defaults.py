"""The rules from_defaults applies to core-style arguments (pure)."""

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer

from llama_index_convrag.chat.defaults import (CHAT_MODES, NO_LLM_REWRITE_STRATEGY, alias, check_chat_mode,
                                               check_parts, pick_one, rewrite_strategy_for, seed_messages)
from llama_index_convrag.testing import ScriptedLLM


def test_chat_modes_and_their_prompts() -> None:
    assert CHAT_MODES == ("condense_question", "condense_plus_context", "context")
    llm = ScriptedLLM.fixed("x")
    assert check_chat_mode("context", "Be brief.", None, None, llm) == "context"
    assert check_chat_mode("condense_plus_context", None, None, None, None) == "condense_plus_context"
    with pytest.raises(ValueError, match=r"chat_mode must be one of \['condense_question', 'condense_plus_context', "
                                         r"'context'\], got 'react'"):
        check_chat_mode("react", None, None, None, llm)
    with pytest.raises(ValueError, match=r"\['system_prompt', 'context_prompt'\] shape the answers of chat_mode "
                                         r"'condense_plus_context' or 'context'"):
        check_chat_mode("condense_question", "Be brief.", "{context_str}", None, llm)
    with pytest.raises(ValueError, match=r"\['system_prompt'\] are prompts for an LLM; with llm=None the answers "
                                         r"are extractive"):
        check_chat_mode("context", "Be brief.", None, None, None)


def test_parts_exactly_one_source_of_answers() -> None:
    with pytest.raises(ValueError, match=r"pass exactly one of retriever= .* or query_engine="):
        check_parts(None, None, None, None)
    with pytest.raises(ValueError, match=r"pass exactly one of retriever="):
        check_parts(object(), object(), object(), None)
    with pytest.raises(ValueError, match=r"a retriever needs synthesizer="):
        check_parts(object(), None, None, None)
    with pytest.raises(ValueError, match=r"pass a retriever without synthesizer= or query_engine="):
        check_parts(object(), object(), None, object())


def test_aliases_agree_or_fail() -> None:
    assert alias("return_source_documents", False, "return_source_nodes", {}) == {"return_source_nodes": False}
    assert alias("return_source_documents", None, "return_source_nodes", {"return_source_nodes": True}) == {}
    assert alias("return_source_documents", True, "return_source_nodes", {"return_source_nodes": True}) == {
        "return_source_nodes": True}
    with pytest.raises(TypeError, match=r"return_source_documents=False contradicts return_source_nodes=True"):
        alias("return_source_documents", False, "return_source_nodes", {"return_source_nodes": True})
    assert pick_one("condense_prompt", None, "condense_question_prompt", "p") == "p"
    with pytest.raises(TypeError, match=r"pass condense_prompt= or condense_question_prompt="):
        pick_one("condense_prompt", "a", "condense_question_prompt", "b")


def test_seed_from_chat_history_or_memory() -> None:
    history = [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="hello")]
    assert seed_messages(history, None) == history
    assert seed_messages(None, ChatMemoryBuffer.from_defaults(chat_history=history)) == history
    assert seed_messages(None, None) == []
    with pytest.raises(TypeError, match=r"pass chat_history= or memory="):
        seed_messages(history, ChatMemoryBuffer.from_defaults())


def test_rewrite_strategy_rules() -> None:
    llm = ScriptedLLM.fixed("q")
    assert rewrite_strategy_for(None, False, llm) == "llm"
    assert rewrite_strategy_for(None, False, None) == NO_LLM_REWRITE_STRATEGY == "contextual"
    assert rewrite_strategy_for("auto", False, llm) == "llm"
    assert rewrite_strategy_for("auto", False, None) == "contextual"
    assert rewrite_strategy_for("auto", True, llm) == "none"
    with pytest.raises(ValueError, match=r"rewrite_strategy must be one of \['auto', 'llm', 'contextual', 'concat', "
                                         r"'none'\], got 'contextual_fused'"):
        rewrite_strategy_for("contextual_fused", False, None)
    assert rewrite_strategy_for("concat", False, llm) == "concat"
    assert rewrite_strategy_for(None, True, llm) == rewrite_strategy_for("none", True, llm) == "none"
    with pytest.raises(ValueError, match=r"skip_condense=True means rewrite_strategy 'none', got rewrite_strategy="
                                         r"'llm'"):
        rewrite_strategy_for("llm", True, llm)
