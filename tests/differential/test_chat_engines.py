"""Every chat mode, core's engine against ours under core's name (``llama_index_convrag.chat``), over generated
conversations: the same answers, the same LLM calls in the same order (condense prompts, answer prompts), the same
source nodes per turn and the same remembered conversation.

Ours is built exactly as core's is, only the import differs. What differs on purpose is asserted in
``test_chat_divergences.py`` (one test per row of docs/COMPATIBILITY.md).
"""

from __future__ import annotations

from typing import Any, Sequence

import llama_index.core.chat_engine as core
import pytest
from hypothesis import given
from hypothesis import strategies as st
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.settings import Settings

import llama_index_convrag.chat as ours
from tests.differential.harness import (DIFFERENTIAL, ListRetriever, nodes_of, queries, run_conversation,
                                        settings_llm, texts)

MODES = {"condense_question": "CondenseQuestionChatEngine", "condense_plus_context": "CondensePlusContextChatEngine",
         "context": "ContextChatEngine"}
seeds = st.lists(st.tuples(queries, texts), max_size=3).map(
    lambda pairs: [ChatMessage(role=r, content=c) for q, a in pairs for r, c in (("user", q), ("assistant", a))])


def build(module: Any, mode: str, nodes: Sequence[Any], seed: Sequence[ChatMessage], system_prompt: Any) -> Any:
    cls = getattr(module, MODES[mode])

    def make(llm: Any) -> Any:
        retriever = ListRetriever(nodes)
        with settings_llm(llm if module is core else None):
            if mode == "condense_question":
                engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
                return cls.from_defaults(engine, chat_history=list(seed), llm=llm)
            extra = {"system_prompt": system_prompt} if system_prompt is not None else {}
            return cls.from_defaults(retriever, llm=llm, chat_history=list(seed), **extra)

    return make


@pytest.mark.parametrize("mode", list(MODES))
@DIFFERENTIAL
@given(data=st.data(), contents=st.lists(texts, max_size=4), seed=seeds,
       messages=st.lists(queries, min_size=1, max_size=3), chat=st.booleans(), streaming=st.booleans(),
       use_async=st.booleans())
def test_every_chat_mode_over_generated_conversations(mode, data, contents, seed, messages, chat, streaming,
                                                      use_async):
    system_prompt = data.draw(st.one_of(st.none(), texts), "system_prompt") if mode != "condense_question" else None
    streaming = streaming and mode != "condense_question"  # streamed over a query engine: a divergence
    nodes = nodes_of(contents)
    runs = [run_conversation(build(module, mode, nodes, seed, system_prompt), dict(chat=chat), messages,
                             streaming=streaming, use_async=use_async) for module in (core, ours)]
    theirs, mine = runs
    assert mine.calls == theirs.calls
    assert mine.answers == theirs.answers
    assert mine.sources == theirs.sources
    assert mine.history == theirs.history


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("use_async", [False, True])
def test_an_llm_assigned_to_settings_answers_as_it_does_in_core(mode, use_async):
    """No ``llm=`` anywhere, ``Settings.llm`` assigned (as a core user configures it): core's engine and ours ask
    that LLM the same things and remember the same conversation (streamed turns included)."""
    nodes = nodes_of(["the bridge opened in 1932 and carries trains", "巴黎是法国的首都。"])
    seed = [ChatMessage(role="user", content="tell me about the bridge?"),
            ChatMessage(role="assistant", content="it crosses the river north of the city")]

    def make(module: Any) -> Any:
        def build_engine(llm: Any) -> Any:
            Settings.llm = llm  # stays assigned for the whole conversation, as configuration does
            retriever = ListRetriever(nodes)
            if mode == "condense_question":
                return getattr(module, MODES[mode]).from_defaults(RetrieverQueryEngine.from_args(retriever),
                                                                  chat_history=list(seed))
            return getattr(module, MODES[mode]).from_defaults(retriever, chat_history=list(seed))

        return build_engine

    runs = [run_conversation(make(module), dict(chat=True), ["when did it open?", "巴黎呢？"],
                             streaming=mode != "condense_question", use_async=use_async) for module in (core, ours)]
    theirs, mine = runs
    assert len(mine.calls) >= 2 and mine.calls == theirs.calls
    assert mine.answers == theirs.answers and mine.sources == theirs.sources and mine.history == theirs.history
