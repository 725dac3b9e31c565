"""Rate limits per API key, counted by the ``limits`` library (sliding window counters): a request over a limit is
answered 429 ``rate_limited`` with ``Retry-After`` (seconds) before anything else is done for it.

Two limits: ``requests`` counts every ``/v1`` request but ``GET /v1/health``; ``turns`` counts the requests that
start a turn (a message, a regeneration, a chat completion), valid or not. A key is counted by its hash (an unknown
key too: guessing keys is rate limited), a request without a key as one client. The counters live in the worker
process (``memory``; with N workers a client gets up to N times the limit) unless ``storage`` names a shared one
(``redis://host``, as ``limits`` reads storage URIs; its client package must be installed).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Optional

from limits import parse_many
from limits.storage import storage_from_string
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.serve.errors import APIError

#: the storage URI of counters kept in the worker's memory
MEMORY = "async+memory://"


@dataclass(frozen=True)
class RateLimits:
    """Per-key limits in ``limits``' notation (``"600/minute"``, ``"10/second;300/hour"``); None turns one off.

    The defaults let a person chat and a page poll freely (a turn a second, sustained, is far above what a reader
    asks) and stop a client in a loop within a minute."""

    requests: Optional[str] = "1200/minute"
    turns: Optional[str] = "60/minute"
    storage: str = MEMORY

    def __post_init__(self) -> None:
        for name in ("requests", "turns"):
            value = getattr(self, name)
            if value is not None:
                try:
                    parse_many(value)
                except ValueError as e:
                    raise ConfigurationError(f"{name} rate limit {value!r} is not a rate ('N/second', 'N/minute', "
                                             "'N/hour', 'N/day', several joined by ';')") from e


class RateLimiter:
    """The limits of :class:`RateLimits` over one counter storage (built once per process)."""

    def __init__(self, limits: RateLimits, storage: Optional[Any] = None) -> None:
        self.limits = limits
        self._requests = parse_many(limits.requests) if limits.requests is not None else []
        self._turns = parse_many(limits.turns) if limits.turns is not None else []
        self._strategy = SlidingWindowCounterRateLimiter(
            storage if storage is not None else storage_from_string(limits.storage))

    @property
    def enabled(self) -> bool:
        return bool(self._requests or self._turns)

    async def check(self, client: str, turn: bool = False) -> None:
        """Count one request of ``client`` (a key's hash, or ``open``); 429 with ``Retry-After`` when it is over a
        limit (then it is not counted)."""
        for item in (*self._requests, *(self._turns if turn else ())):
            if not await self._strategy.hit(item, client):
                stats = await self._strategy.get_window_stats(item, client)
                wait = max(1, math.ceil(stats.reset_time - time.time()))
                kind = "turns" if item in self._turns and turn else "requests"
                raise APIError(429, "rate_limited", f"too many {kind} for this API key: the limit is {item} "
                                                    f"({kind} rate limit); retry in {wait} s",
                               headers={"Retry-After": str(wait)})
