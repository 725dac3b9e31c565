"""Milvus calls as data, and the drivers that run them.

Code that talks to Milvus in more than one round trip (retrieval: searches, then a ``get`` of the kept rows; episodic
recall: two searches, then a ``get`` of the candidates) is written once as a generator of steps: it yields the list
of :class:`MilvusCall` a step needs, receives their results in order and finally returns its outcome. :func:`drive`
runs the steps on the sync client, one call after another; :func:`adrive` on the async client, a step's calls at
once. :class:`LoopClients` holds the async client of the running event loop (an ``AsyncMilvusClient`` is bound to
the loop that opened it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Dict, Generator, List, Optional, Tuple

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus_async


@dataclass(frozen=True)
class MilvusCall:
    """One Milvus client call (``search``, ``hybrid_search``, ``get`` ...), run by the sync or the async client."""

    method: str
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]


#: Yields lists of calls (a list may run concurrently), receives their results in order, returns the outcome.
MilvusSteps = Generator[List[MilvusCall], List[Any], Any]


def drive(client: Any, steps: MilvusSteps) -> Any:
    """Run ``steps``' calls one after another on the sync ``client``; return what the generator returns."""
    try:
        calls = next(steps)
        while True:
            calls = steps.send([getattr(client, c.method)(*c.args, **c.kwargs) for c in calls])
    except StopIteration as done:
        return done.value


async def adrive(client: Any, steps: MilvusSteps) -> Any:
    """Async twin of :func:`drive`: each step's calls run concurrently on the async ``client``."""
    try:
        calls = next(steps)
        while True:
            calls = steps.send(list(await asyncio.gather(
                *(getattr(client, c.method)(*c.args, **c.kwargs) for c in calls))))
    except StopIteration as done:
        return done.value


class LoopClients:
    """One ``AsyncMilvusClient`` per running event loop, opened from ``target`` on first use in that loop."""

    def __init__(self, target: Optional[MilvusTarget], without_target: str) -> None:
        """``without_target``: the error message when an async call is made and ``target`` is None."""
        self._target = target
        self._without_target = without_target
        self._clients: Dict[int, Any] = {}

    def get(self) -> Any:
        """The running loop's client (call from inside a coroutine)."""
        if self._target is None:
            raise ConfigurationError(self._without_target)
        loop = asyncio.get_running_loop()
        client = self._clients.get(id(loop))
        if client is None:
            client = connect_milvus_async(self._target)
            self._clients = {id(loop): client}
        return client


__all__ = ["LoopClients", "MilvusCall", "MilvusSteps", "adrive", "drive"]
