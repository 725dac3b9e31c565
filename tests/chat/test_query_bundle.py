"""``chat`` / ``achat`` / ``stream_chat`` / ``astream_chat`` accept a ``QueryBundle`` (as core's engines do) in every
chat mode: its ``query_str`` is the user's words, stored and retrieved with."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.schema import QueryBundle

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine
from llama_index_convrag.testing import ScriptedLLM

MODES = ["condense_question", "condense_plus_context", "context"]


def engine(retriever: Any, store: Any, mode: str) -> ConvRAGChatEngine:
    llm = ScriptedLLM.fixed("Nolan directed it.", chat_model=mode != "condense_question")
    return ConvRAGChatEngine.from_defaults(retriever, llm, chat_mode=mode, conversation_store=store,
                                           conversation_id="conv", answer=AnswerOptions(citations=False))



@pytest.mark.parametrize("mode", MODES)
def test_chat_and_stream_chat_take_a_query_bundle(retriever: Any, store: Any, mode: str) -> None:
    e = engine(retriever, store, mode)
    assert str(e.chat(QueryBundle("Who directed Inception?"))) == "Nolan directed it."
    assert "".join(e.stream_chat(QueryBundle("When?")).response_gen) == "Nolan directed it."
    assert [m.content for m in e.chat_history if m.role.value == "user"] == ["Who directed Inception?", "When?"]


@pytest.mark.parametrize("mode", MODES)
async def test_achat_and_astream_chat_take_a_query_bundle(retriever: Any, store: Any, mode: str) -> None:
    e = engine(retriever, store, mode)
    assert str(await e.achat(QueryBundle("Who directed Inception?"))) == "Nolan directed it."
    response = await e.astream_chat(QueryBundle("When?"))
    assert "".join([d async for d in response.async_response_gen()]) == "Nolan directed it."
    assert [m.content for m in e.chat_history if m.role.value == "user"] == ["Who directed Inception?", "When?"]


def test_other_message_types_are_refused_naming_them(retriever: Any, store: Any) -> None:
    e = engine(retriever, store, "context")
    with pytest.raises(TypeError, match=r"message must be a str or a QueryBundle, got int: 42"):
        e.chat(42)  # type: ignore[arg-type]
    assert e.chat_history == []
