"""Test doubles shared by every test module (they live in the package so notebooks and benches can use them)."""

import threading
from typing import Any, Callable, List, Optional

from llama_index.core.instrumentation.event_handlers import BaseEventHandler

from llama_index_convrag.embeddings.identity import embed_model_id

from llama_index_convrag.testing.openai_server import LocalOpenAIServer
from llama_index_convrag.testing.scripted_llm import LLMCall, ScriptedFailure, ScriptedLLM, split_deltas

__all__ = ["EmbeddingWrapper", "EventCollector", "LLMCall", "LocalOpenAIServer", "ScriptedFailure", "ScriptedLLM",
           "run_threads", "split_deltas"]


class EventCollector(BaseEventHandler):
    """Keeps every instrumentation event it is handed, in order (add it to a dispatcher, read ``events``)."""

    events: List[Any] = []

    @classmethod
    def class_name(cls) -> str:
        return "EventCollector"

    def handle(self, event: Any, **kwargs: Any) -> None:
        self.events.append(event)


def run_threads(worker: Callable[[int], None], count: int) -> None:
    """Run ``worker(0)`` .. ``worker(count - 1)`` in parallel threads and wait for all of them."""
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


class EmbeddingWrapper:
    """Base of the tests' wrappers around a real embedding model that act at the N-th batch call (count, signal,
    kill): embeds through the wrapped model, ``embed_batch_size`` texts at a time, and reports the wrapped model's
    ``embed_model_id`` (its vectors are the ones stored, so a later ingest with that model may use the collection).
    Subclasses override :meth:`get_text_embedding_batch` and call ``super()`` for the vectors."""

    def __init__(self, model: Any, embed_batch_size: int = 2) -> None:
        self.model, self.embed_batch_size = model, embed_batch_size

    def get_text_embedding_batch(self, texts: List[str], **kw: Any) -> List[List[float]]:
        return self.model.get_text_embedding_batch(texts)

    def get_text_embedding(self, text: str) -> List[float]:
        return self.model.get_text_embedding(text)

    @property
    def embed_model_id(self) -> Optional[str]:
        return embed_model_id(self.model)
