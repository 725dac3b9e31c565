"""Test doubles shared by every test module (they live in the package so notebooks and benches can use them)."""

import threading
from typing import Any, Callable, List

from llama_index.core.instrumentation.event_handlers import BaseEventHandler

from llama_index_convrag.testing.openai_server import LocalOpenAIServer
from llama_index_convrag.testing.scripted_llm import LLMCall, ScriptedFailure, ScriptedLLM, split_deltas

__all__ = ["EventCollector", "LLMCall", "LocalOpenAIServer", "ScriptedFailure", "ScriptedLLM", "run_threads",
           "split_deltas"]


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
