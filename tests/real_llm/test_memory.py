"""Memory on the real model: a conversation longer than the recent window (4 messages) over real Milvus Lite and the
local embeddings, with recall and the running summary on (facts off: two more model calls per turn on this CPU tier;
the scripted tier covers them). The summary is written by the model within its cap; the last question is answered
from what the user said in the first turn, which only memory can bring back (the default chat mode answers the
question alone, with no history)."""

from typing import Any, Iterator

import pytest
from llama_index.core import Document

from llama_index_convrag.chat import RewriteOptions
from llama_index_convrag.config import OpenAICompatible
from llama_index_convrag.memory import EpisodicOptions, MemoryOptions, SummaryOptions
from tests.chat.conftest import DOCS, store  # noqa: F401 - fixture

pytestmark = pytest.mark.real_llm

CAP = 120
OPTIONS = MemoryOptions(episodic=EpisodicOptions(window=4, k=3, collection_name="real_llm_memory_recall"),
                        summary=SummaryOptions(window=4, max_tokens=CAP))
TALK = [
    "My sister Ana is allergic to peanuts.",
    "Who directed Inception?",
    "What is the capital of Germany?",
]
LAST = "Which food must my sister Ana avoid?"


@pytest.fixture(scope="module")
def docs_index(milvus_client: Any, milvus_target: Any, embed_model: Any) -> Iterator[Any]:
    from llama_index_convrag.indices import ConvRAGIndex

    name = "real_llm_memory_docs"
    index = ConvRAGIndex.from_documents([Document(text=t, id_=k) for k, t in DOCS], collection_name=name,
                                        embed_model=embed_model, client=milvus_client, target=milvus_target)
    yield index
    milvus_client.drop_collection(name)
    milvus_client.drop_collection(OPTIONS.episodic.collection_name)


@pytest.mark.timeout(1200)
def test_a_conversation_longer_than_the_window_with_memory_on(real_llm_server: Any, docs_index: Any,
                                                              store: Any) -> None:  # noqa: F811
    llm = OpenAICompatible(**real_llm_server.client_kwargs(max_tokens=96))  # greedy, short answers
    with docs_index.as_chat_engine(llm=llm, conversation_store=store, memory=OPTIONS,
                                   rewrite=RewriteOptions(strategy="none"),
                                   retriever_kwargs={"similarity_top_k": 2}) as engine:
        for line in TALK:
            engine.chat(line)
            assert engine.flush_memory(600)
        response = engine.chat(LAST)
        assert engine.flush_memory(600)
        memory, cid = engine.memory, engine.conversation_id
        assert memory is not None and memory.writer.failed == 0, list(memory.writer.failures)
        # the summary: written by the model (not the no-LLM rule), over the messages that left the window, capped
        versions = memory.summary_versions("local", cid)
        assert versions and all(v.source == "llm" and 0 < v.tokens <= CAP for v in versions)
        assert versions[-1].covered == 2 * (len(TALK) + 1) - OPTIONS.summary.window
        # the first turn left the window long ago: the last turn recalled it, and the model answered from it
        record = response.metadata["turn"].memory
        recalled = {u["text"] for u in record["recall"]["units"]}
        assert TALK[0] in recalled and 0 in record["recalled_kept"]
        assert "peanut" in str(response).lower(), str(response)
        print("summary:", versions[-1].text, "\nanswer:", str(response))
