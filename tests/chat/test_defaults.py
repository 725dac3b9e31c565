"""The rules from_defaults applies to core-style arguments (pure)."""

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer

from llama_index_convrag.chat.defaults import (CHAT_MODES, NO_LLM_REWRITE_STRATEGY, check_chat_mode, check_parts,
                                               rewrite_strategy_for, seed_messages, streaming_twin)
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


def test_a_given_synthesizer_streams_through_its_twin() -> None:
    from llama_index_convrag.synthesizers import get_response_synthesizer

    plain = get_response_synthesizer(llm=ScriptedLLM.fixed("x"))
    twin = streaming_twin(plain)
    assert twin is not plain and twin._streaming and not plain._streaming and twin._llm is plain._llm
    assert streaming_twin(twin) is twin and streaming_twin(object()) is None


def test_seed_from_chat_history_or_memory() -> None:
    history = [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="hello")]
    assert seed_messages(history, None) == history
    assert seed_messages(None, ChatMemoryBuffer.from_defaults(chat_history=history)) == history
    assert seed_messages(None, None) == []
    with pytest.raises(TypeError, match=r"pass chat_history= or memory="):
        seed_messages(history, ChatMemoryBuffer.from_defaults())


def test_rewrite_strategy_rules() -> None:
    llm = ScriptedLLM.fixed("q")
    assert rewrite_strategy_for("auto", False, None) == NO_LLM_REWRITE_STRATEGY == "contextual"
    assert rewrite_strategy_for("auto", False, llm) == "llm"
    assert rewrite_strategy_for("auto", False, None) == "contextual"
    assert rewrite_strategy_for("auto", True, llm) == "none"
    with pytest.raises(ValueError, match=r"rewrite strategy must be one of \['auto', 'llm', 'contextual', 'concat', "
                                         r"'none'\], got 'contextual_fused'"):
        rewrite_strategy_for("contextual_fused", False, None)
    assert rewrite_strategy_for("concat", False, llm) == "concat"
    assert rewrite_strategy_for("auto", True, llm) == rewrite_strategy_for("none", True, llm) == "none"
    with pytest.raises(ValueError, match=r"chat_mode 'context' retrieves with the question as written \(strategy "
                                         r"'none'\), got RewriteOptions\(strategy='llm'\)"):
        rewrite_strategy_for("llm", True, llm)
