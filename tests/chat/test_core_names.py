"""The classes under core's names, used as a LlamaIndex user uses core's: a ``VectorStoreIndex`` over Milvus, its
retriever or query engine, ``from_defaults`` with core's keywords, and the four ways to chat. Only the import is ours.
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine.types import BaseChatEngine
from llama_index.core.memory import ChatMemoryBuffer

from llama_index_convrag.chat import (
    CondensePlusContextChatEngine,
    CondenseQuestionChatEngine,
    ContextChatEngine,
    ConvRAGChatEngine,
)
from llama_index_convrag.testing import ScriptedLLM

PIRATE = "Talk like a pirate."


def echo(**kw: Any) -> ScriptedLLM:
    return ScriptedLLM.echo(chat_model=True, **kw)


def test_condense_plus_context_puts_the_system_prompt_and_the_conversation_in_front_of_the_llm(retriever):
    llm = echo()
    engine = CondensePlusContextChatEngine.from_defaults(retriever, llm=llm, system_prompt=PIRATE)
    assert isinstance(engine, BaseChatEngine) and isinstance(engine, ConvRAGChatEngine)
    first = engine.chat("Who directed Inception?")
    assert PIRATE in str(first) and "Who directed Inception?" in str(first)
    assert "Christopher Nolan" in llm.calls[0].messages[0].content  # the retrieved passage, in the system message
    assert [n.node.node_id for n in first.source_nodes][:1] == ["inception"]
    second = engine.chat("When was it released?")
    assert "Who directed Inception?" in str(second) and "When was it released?" in str(second)
    assert len(engine.chat_history) == 4 and len(llm.calls) == 3  # one condense call for the follow-up
    assert llm.calls[1].prompt.count("Follow Up Input: When was it released?") == 1


def test_condense_plus_context_streams_in_several_deltas(retriever):
    engine = CondensePlusContextChatEngine.from_defaults(retriever, llm=echo(), system_prompt=PIRATE)
    response = engine.stream_chat("Who directed Inception?")
    deltas = list(response.response_gen)
    assert len(deltas) > 1 and "".join(deltas).rstrip() == str(response)
    assert PIRATE in str(response) and len(engine.chat_history) == 2


async def test_condense_plus_context_async_twins(retriever):
    engine = CondensePlusContextChatEngine.from_defaults(retriever, llm=echo(), system_prompt=PIRATE)
    assert PIRATE in str(await engine.achat("Who directed Inception?"))
    response = await engine.astream_chat("What is the capital of France?")
    deltas = [d async for d in response.async_response_gen()]
    assert len(deltas) > 1 and "".join(deltas).rstrip() == str(response)
    if response.awrite_response_to_history_task is not None:
        await response.awrite_response_to_history_task
    assert [m.role for m in engine.chat_history] == [MessageRole.USER, MessageRole.ASSISTANT] * 2


def test_context_engine_retrieves_with_the_users_words_and_takes_prefix_messages(retriever):
    llm = echo()
    prefix = [ChatMessage(role="system", content=PIRATE), ChatMessage(role="user", content="Keep it short."),
              ChatMessage(role="assistant", content="Aye.")]
    engine = ContextChatEngine.from_defaults(retriever, llm=llm, prefix_messages=prefix)
    engine.chat("What is the capital of France?")
    [call] = llm.calls  # no condense call in this mode
    system, *rest = call.messages
    assert system.content.startswith("Use the context information below") and system.content.endswith(PIRATE)
    assert "Paris is the capital of France" in system.content
    assert [m.content for m in rest] == ["Keep it short.", "Aye.", "What is the capital of France?"]
    with pytest.raises(ValueError, match="pass system_prompt= or prefix_messages=, not both"):
        ContextChatEngine.from_defaults(retriever, llm=llm, system_prompt=PIRATE, prefix_messages=prefix)


def test_context_engine_takes_a_context_template(retriever):
    llm = echo()
    engine = ContextChatEngine.from_defaults(retriever, llm=llm, context_template="Notes:\n{context_str}\n")
    engine.chat("Who directed Inception?")
    assert llm.calls[0].messages[0].content.startswith("Notes:\nInception is a 2010")


def test_condense_question_engine_asks_the_query_engine_the_condensed_question(index):
    def reply(prompt: str) -> str:
        return "When was Inception released?" if "<Standalone question>" in prompt else "In 2010."

    llm = ScriptedLLM.from_fn(reply)
    engine = CondenseQuestionChatEngine.from_defaults(index.as_query_engine(llm=llm), llm=llm)
    assert str(engine.chat("Who directed Inception?")) == "In 2010."
    engine.chat("When was it released?")
    assert "<Follow Up Message>\nWhen was it released?" in llm.prompts[1]
    assert "Query: When was Inception released?" in llm.prompts[2]
    engine.reset()
    assert engine.chat_history == []


def test_history_and_memory_seed_the_conversation(retriever):
    history = [ChatMessage(role="user", content="Who directed Inception?"),
               ChatMessage(role="assistant", content="Christopher Nolan.")]
    for seed in ({"chat_history": history}, {"memory": ChatMemoryBuffer.from_defaults(chat_history=history)}):
        llm = echo()
        engine = CondensePlusContextChatEngine.from_defaults(retriever, llm=llm, **seed)
        engine.chat("What else did he direct?")
        assert "user: Who directed Inception?\nassistant: Christopher Nolan." in llm.calls[0].prompt
        assert len(engine.chat_history) == 4


def test_an_explicit_empty_history_answers_without_condensing(index):
    llm = ScriptedLLM.fixed("2010.")
    history = [ChatMessage(role="user", content="Who directed Inception?"),
               ChatMessage(role="assistant", content="Christopher Nolan.")]
    engine = CondenseQuestionChatEngine.from_defaults(index.as_query_engine(llm=llm), chat_history=history, llm=llm)
    engine.chat("When was Inception released?", chat_history=[])
    assert llm.call_count == 1 and "Query: When was Inception released?" in llm.prompts[0]


def test_core_refusals_keep_their_meaning(index, retriever):
    llm = ScriptedLLM.fixed("x")
    with pytest.raises(ValueError, match=r"\['system_prompt'\] shape the answers"):
        CondenseQuestionChatEngine.from_defaults(index.as_query_engine(llm=llm), llm=llm, system_prompt=PIRATE)
    with pytest.raises(ValueError, match=r"\['prefix_messages'\] shape the answers"):
        CondenseQuestionChatEngine.from_defaults(index.as_query_engine(llm=llm), llm=llm,
                                                 prefix_messages=[ChatMessage(role="user", content="hi")])
    with pytest.raises(TypeError, match=r"does not take \['streaming_mode'\] \(streaming_mode: unknown\)"):
        CondensePlusContextChatEngine.from_defaults(retriever, llm=llm, streaming_mode=True)


def test_our_options_pass_through(retriever, store):
    engine = CondensePlusContextChatEngine.from_defaults(retriever, llm=echo(), conversation_store=store,
                                                        conversation_id="user-1")
    engine.chat("Who directed Inception?")
    assert [m.role for m in store.get_conversation("user-1")] == ["user", "assistant"]
