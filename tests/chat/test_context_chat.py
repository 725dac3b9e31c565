"""ContextChat: the condense_plus_context / context answer prompts (pure layout, our synthesizer)."""

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.chat.context_chat import ContextChat, chat_messages
from llama_index_convrag.prompts.chat import DEFAULT_CONTEXT_PROMPT
from llama_index_convrag.synthesizers import BaseSynthesizer
from llama_index_convrag.testing import ScriptedLLM

HISTORY = [ChatMessage(role="user", content="Who directed Inception?"),
           ChatMessage(role="assistant", content="Christopher Nolan.")]


def test_chat_messages_layout() -> None:
    messages = chat_messages(DEFAULT_CONTEXT_PROMPT, "  Talk like a pirate. ", HISTORY, MessageRole.SYSTEM)
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0].content == DEFAULT_CONTEXT_PROMPT.get_template() + "Talk like a pirate."
    assert messages[1:3] == HISTORY and messages[3].content == "{query_str}"


def test_synthesizer_is_ours_and_sends_context_history_question() -> None:
    llm = ScriptedLLM.fixed("Arr, 2010.", chat_model=True)
    chat = ContextChat(llm, system_prompt="Talk like a pirate.", context_prompt="Docs:\n{context_str}\n")
    synth = chat.synthesizer(HISTORY, streaming=False)
    assert isinstance(synth, BaseSynthesizer)
    node = NodeWithScore(node=TextNode(text="Inception is a 2010 film."), score=1.0)
    assert str(synth.synthesize("When was it released?", [node])) == "Arr, 2010."
    [call] = llm.calls
    assert [(m.role, m.content) for m in call.messages] == [
        ("system", "Docs:\nInception is a 2010 film.\nTalk like a pirate."),
        ("user", "Who directed Inception?"), ("assistant", "Christopher Nolan."), ("user", "When was it released?")]
    assert chat.system_text() == "Docs:\n\nTalk like a pirate."
    assert set(chat.get_prompts()) == {"context_prompt", "context_refine_prompt"}


def test_templates_come_from_the_context_prompts() -> None:
    with pytest.raises(ValueError, match=r"context chat modes build \['text_qa_template'\] from context_prompt"):
        ContextChat(ScriptedLLM.fixed("x"), synth_kwargs={"text_qa_template": "{context_str}{query_str}"})


def test_context_mode_defaults_to_cores_context_chat_template_and_keeps_prefix_messages() -> None:
    from llama_index.core.chat_engine.context import DEFAULT_CONTEXT_TEMPLATE

    llm = ScriptedLLM.fixed("ok", chat_model=True)
    prefix = [ChatMessage(role="user", content="Be brief."), ChatMessage(role="assistant", content="Sure.")]
    chat = ContextChat(llm, mode="context", prefix_messages=prefix)
    node = NodeWithScore(node=TextNode(text="Inception is a 2010 film."), score=1.0)
    chat.synthesizer(HISTORY, streaming=False).synthesize("When?", [node])
    [call] = llm.calls
    assert call.messages[0].content == DEFAULT_CONTEXT_TEMPLATE.format(context_str="Inception is a 2010 film.")
    assert [m.content for m in call.messages[1:]] == ["Be brief.", "Sure.", *(m.content for m in HISTORY), "When?"]
    assert chat.system_text().endswith("Be brief.\nSure.")


def test_unknown_mode_is_refused_naming_the_modes() -> None:
    with pytest.raises(ValueError, match=r"mode must be one of \['condense_plus_context', 'context'\], got 'best'"):
        ContextChat(ScriptedLLM.fixed("x"), mode="best")
