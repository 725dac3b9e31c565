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
