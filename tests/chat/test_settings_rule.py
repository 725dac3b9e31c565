"""One Settings rule for the chat engine and the synthesizer factory (synthesizers/resolve.py): an argument passed
wins; else a value assigned on ``Settings`` (``llm``, ``prompt_helper``, ``chat_prompt_helper``) is used; else
nothing is built behind the user's back (core's ``Settings.llm`` getter, which builds a default OpenAI client, is
never called)."""

from __future__ import annotations

from typing import Iterator

import pytest
from llama_index.core import Settings
from llama_index.core.indices.prompt_helper import ChatPromptHelper, PromptHelper
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine
from llama_index_convrag.synthesizers import CompactAndRefine, get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM
from tests.chat.conftest import FixedRetriever

NODES = [NodeWithScore(node=TextNode(id_="inception", text="Inception is a 2010 film by Christopher Nolan."), score=1.0)]


@pytest.fixture(autouse=True)
def clean_settings() -> Iterator[None]:
    saved = Settings._llm, Settings._prompt_helper, Settings._chat_prompt_helper
    Settings._llm = Settings._prompt_helper = Settings._chat_prompt_helper = None
    yield
    Settings._llm, Settings._prompt_helper, Settings._chat_prompt_helper = saved


def test_an_llm_assigned_to_settings_is_used_by_engine_factory_and_classes() -> None:
    llm = ScriptedLLM.fixed("Nolan directed it [1].")
    Settings.llm = llm
    engine = ConvRAGChatEngine.from_defaults(FixedRetriever(NODES), answer=AnswerOptions(citation_mode="inline"))
    assert engine._llm is llm and engine._rewriter.strategy == "llm"
    assert engine._synthesizer._llm is llm and engine._streaming_synthesizer._llm is llm
    assert engine.chat("Who directed Inception?").response == "Nolan directed it [1]."
    assert llm.call_count == 1  # first turn: no rewrite, one answer call
    assert get_response_synthesizer()._llm is llm
    assert CompactAndRefine()._llm is llm
    passed = ScriptedLLM.fixed("passed")
    assert ConvRAGChatEngine.from_defaults(FixedRetriever(NODES), passed)._synthesizer._llm is passed  # argument wins


def test_nothing_assigned_nothing_built() -> None:
    engine = ConvRAGChatEngine.from_defaults(FixedRetriever(NODES), answer=AnswerOptions(response_mode="no_text"))
    assert engine._llm is None and engine._rewriter.strategy == "contextual"
    with pytest.raises(ValueError, match=r"needs an LLM: pass llm=\.\.\. .*assign llama_index.core.Settings.llm"):
        get_response_synthesizer()
    with pytest.raises(ValueError, match=r"CompactAndRefine needs an LLM: pass llm=\.\.\. or assign"):
        CompactAndRefine()
    assert Settings._llm is None  # core's getter (a default OpenAI client) was never called


def test_prompt_helpers_assigned_to_settings_are_honoured_by_engine_and_factory() -> None:
    helper, chat_helper = PromptHelper(context_window=16384), ChatPromptHelper(context_window=12000)
    Settings.prompt_helper, Settings.chat_prompt_helper = helper, chat_helper
    llm = ScriptedLLM.fixed("A", context_window=4096)
    engine = ConvRAGChatEngine.from_defaults(FixedRetriever(NODES), llm)
    assert engine._synthesizer._prompt_helper is helper and engine._synthesizer._chat_prompt_helper is chat_helper
    assert get_response_synthesizer(llm=llm)._prompt_helper is helper
    passed = PromptHelper(context_window=2000)
    given = get_response_synthesizer(llm=llm, prompt_helper=passed)  # the synthesizer's own settings: synthesizer=
    engine = ConvRAGChatEngine.from_defaults(FixedRetriever(NODES), llm, synthesizer=given)
    assert engine._synthesizer._prompt_helper is passed and engine._streaming_synthesizer._prompt_helper is passed
    Settings._prompt_helper = None
    assert ConvRAGChatEngine.from_defaults(FixedRetriever(NODES), llm)._synthesizer._prompt_helper.context_window == 4096
