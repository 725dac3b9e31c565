"""Judge fixtures: a small real Milvus Lite index, a scripted judge keyed by passage, an event collector."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.schema import Document

from llama_index_convrag.indices import ConvRAGIndex
from llama_index_convrag.judge import events as judge_events
from llama_index_convrag.testing import ScriptedLLM

DOCS = {
    "nolan": "Christopher Nolan directed the film Inception.",
    "inception": "Inception was released in 2010.",
    "paris": "Paris is the capital of France.",
    "eiffel": "The Eiffel Tower in Paris was built in 1889.",
    "berlin": "Berlin is the capital of Germany.",
    "wall": "The Berlin Wall fell in 1989.",
    "milvus": "Milvus is an open-source vector database.",
    "bm25": "BM25 is a ranking function used by search engines.",
}
TEXT_TO_KEY = {text: key for key, text in DOCS.items()}
JUDGE_MARK = "Grade how well"


@pytest.fixture(scope="module")
def judge_index(milvus_client: Any, milvus_target: Any, embed_model: Any) -> Iterator[ConvRAGIndex]:
    name = f"judge_{abs(hash(__file__)) % 10**8}"
    if milvus_client.has_collection(name):
        milvus_client.drop_collection(name)
    index = ConvRAGIndex.from_documents([Document(text=t, id_=k) for k, t in DOCS.items()], collection_name=name,
                                        embed_model=embed_model, client=milvus_client, target=milvus_target)
    yield index
    milvus_client.drop_collection(name)


@pytest.fixture
def retriever_k(judge_index: ConvRAGIndex) -> Callable[[int], Any]:
    """Dense retriever over :data:`DOCS` returning ``k`` chunks."""
    return lambda k: judge_index.as_retriever(similarity_top_k=k, search_type="dense")


def passage_key(prompt: str) -> str:
    """The DOCS key of the passage in a judge prompt."""
    match = re.search(r"Passage:\n(.*?)\n\nReply with JSON", prompt, re.S)
    assert match is not None, prompt
    return TEXT_TO_KEY[match.group(1).strip()]


def question_of(prompt: str) -> str:
    match = re.search(r"(?:Question|Query): (.*)", prompt)
    assert match is not None, prompt
    return match.group(1).strip()


def scripted(rules: Dict[str, Any], default: Optional[Any] = None, **kw: Any) -> ScriptedLLM:
    """Judge calls reply ``rules[passage key]`` (a dict, a raw string, or fn(question, key) -> either); other calls
    (synthesis) answer ``A(<query>)``."""
    fallback = {"grade": 0, "reason": "unrelated"} if default is None else default

    def fn(prompt: str) -> str:
        if JUDGE_MARK not in prompt:
            return f"A({question_of(prompt)})"
        key = passage_key(prompt)
        reply = rules.get(key, fallback)
        if callable(reply):
            reply = reply(question_of(prompt), key)
        return reply if isinstance(reply, str) else json.dumps(reply)

    return ScriptedLLM.from_fn(fn, **kw)


def judge_prompts(llm: ScriptedLLM) -> List[str]:
    return [p for p in llm.prompts if JUDGE_MARK in p]


class Collect(BaseEventHandler):
    events: List[Any] = []

    def handle(self, event: Any, **kwargs: Any) -> None:
        if type(event).__name__ in judge_events.__all__:
            self.events.append(event)


@pytest.fixture
def judge_events_seen() -> Iterator[List[Any]]:
    root = get_dispatcher()
    handler = Collect(events=[])
    root.add_event_handler(handler)
    yield handler.events
    root.event_handlers.remove(handler)
