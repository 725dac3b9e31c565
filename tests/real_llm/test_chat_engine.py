"""The chat engine on the real model over real Milvus Lite: rewrite, streaming placeholder lifecycle, citations."""

import pytest

from llama_index_convrag.chat import ConvRAGChatEngine
from tests.chat.conftest import index, retriever, store  # noqa: F401 - fixtures

pytestmark = pytest.mark.real_llm


def test_streamed_turns_complete_their_placeholders(real_llm, retriever, store) -> None:  # noqa: F811
    engine = ConvRAGChatEngine.from_defaults(retriever, real_llm, conversation_store=store, conversation_id="c")
    first = engine.stream_chat("Who directed Inception?")
    pending = store.get_message(first.message_id)
    assert (pending.role, pending.status, pending.content) == ("assistant", "pending", "")
    text = "".join(first.response_gen)
    done = store.get_message(first.message_id)
    assert (done.status, done.content, first.status) == ("complete", text, "complete")
    assert "nolan" in text.lower()

    follow = engine.stream_chat("What else did he direct?")
    follow_text = "".join(follow.response_gen)
    record = store.get_turn_record(follow.message_id)
    assert record["status"] == "complete" and record["rewrite_used_llm"]
    assert "nolan" in record["retrieval_query"].lower() or record["rewrite_fallback_reason"]
    assert store.get_message(follow.message_id).content == follow_text


def test_cancelled_stream_keeps_the_partial_answer(real_llm, retriever, store) -> None:  # noqa: F811
    engine = ConvRAGChatEngine.from_defaults(retriever, real_llm, conversation_store=store, conversation_id="c")
    response = engine.stream_chat("Who directed Inception?")
    first = next(iter(response.response_gen))
    response.close()
    message = store.get_message(response.message_id)
    assert (message.status, message.content) == ("cancelled", first)
