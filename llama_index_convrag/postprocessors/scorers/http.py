"""HTTP rerank APIs in the common shape: ``POST {base_url}/rerank`` with ``model, query, documents, top_n``.

The reply is ``{"results": [{"index": i, "relevance_score": s}, ...]}`` (Cohere, Jina, Xinference, vLLM,
DashScope's compatible mode); DashScope's native ``{"output": {"results": [...]}}`` and a bare list of
``{"index", "score"}`` (Hugging Face TEI) are read too. Timeouts, and retries with exponential backoff on 429, 5xx
and transport errors; anything else raises :class:`RerankHTTPError` naming the URL and the status.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import httpx

from llama_index_convrag.errors import ConfigurationError, RerankHTTPError
from llama_index_convrag.postprocessors.scorers.base import Scorer

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 30.0


def build_payload(model: str, query: str, texts: Sequence[str]) -> Dict[str, Any]:
    """The request body; ``top_n`` asks for every document so each gets a score."""
    return {"model": model, "query": query, "documents": list(texts), "top_n": len(texts)}


def parse_scores(payload: Any, count: int, url: str) -> List[float]:
    """One score per document, in input order, from any of the accepted reply shapes."""
    results = payload
    if isinstance(payload, Mapping):
        results = payload.get("results")
        if results is None and isinstance(payload.get("output"), Mapping):
            results = payload["output"].get("results")
        if results is None and "data" in payload:
            results = payload["data"]
    if not isinstance(results, list):
        raise RerankHTTPError(f"rerank reply from {url} has no 'results' list: {str(payload)[:200]!r}")
    scores: List[Optional[float]] = [None] * count
    for item in results:
        if not isinstance(item, Mapping) or "index" not in item:
            raise RerankHTTPError(f"rerank result without an index from {url}: {item!r}")
        index = item["index"]
        score = item.get("relevance_score", item.get("score"))
        if not isinstance(index, int) or not 0 <= index < count:
            raise RerankHTTPError(f"rerank result index {index!r} out of range [0, {count - 1}] from {url}")
        if scores[index] is not None:
            raise RerankHTTPError(f"rerank result index {index} appears twice in the reply from {url}")
        if not isinstance(score, (int, float)) or isinstance(score, bool):
            raise RerankHTTPError(f"rerank result {index} has no numeric relevance_score from {url}: {item!r}")
        scores[index] = float(score)
    absent = [i for i, s in enumerate(scores) if s is None]
    if absent:
        raise RerankHTTPError(f"rerank reply from {url} has no score for documents {absent} of {count}")
    return [float(s) for s in scores]  # type: ignore[arg-type]


class HTTPRerankScorer(Scorer):
    """Scores with a rerank server. ``base_url`` is the API root (``.../v1``); ``/rerank`` is appended."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: Optional[str] = None,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        headers: Optional[Mapping[str, str]] = None,
        client: Optional[httpx.Client] = None,
        async_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not model:
            raise ConfigurationError(f"model must be a non-empty model name, got {model!r}")
        if not timeout_s > 0:
            raise ConfigurationError(f"timeout_s must be > 0, got {timeout_s!r}")
        if max_retries < 0:
            raise ConfigurationError(f"max_retries must be >= 0, got {max_retries!r}")
        if backoff_s < 0:
            raise ConfigurationError(f"backoff_s must be >= 0, got {backoff_s!r}")
        self.url = base_url.rstrip("/") + "/rerank"
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._headers = {"Content-Type": "application/json", **(dict(headers) if headers is not None else {})}
        if api_key is not None:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._client = client
        self._owns_client = client is None
        self._async_client = async_client

    @property
    def name(self) -> str:
        return f"http:{self.model}"

    # pure helpers shared by the twins ------------------------------------------------------------
    def _delay(self, attempt: int, response: Optional[httpx.Response]) -> float:
        """Backoff before retry ``attempt`` (0-based): Retry-After when the server sends one, else exponential."""
        if response is not None:
            retry_after = response.headers.get("Retry-After")
            if retry_after is not None:
                try:
                    return min(max(float(retry_after), 0.0), MAX_RETRY_AFTER_S)
                except ValueError:
                    pass
        return self.backoff_s * (2**attempt)

    def _outcome(self, response: Optional[httpx.Response], error: Optional[Exception], count: int) -> Any:
        """Scores, or ``None`` when the attempt may be retried; raises on a final failure."""
        if error is not None:
            if isinstance(error, httpx.TimeoutException):
                return None
            if isinstance(error, httpx.TransportError):
                return None
            raise RerankHTTPError(f"rerank request to {self.url} failed: {error}") from error
        assert response is not None
        if response.status_code in RETRY_STATUSES:
            return None
        if response.status_code != 200:
            raise RerankHTTPError(
                f"rerank server {self.url} answered HTTP {response.status_code}: {response.text[:300]}"
            )
        try:
            payload = response.json()
        except ValueError as exc:
            raise RerankHTTPError(f"rerank server {self.url} sent invalid JSON: {response.text[:200]!r}") from exc
        return parse_scores(payload, count, self.url)

    def _give_up(self, response: Optional[httpx.Response], error: Optional[Exception]) -> RerankHTTPError:
        tries = self.max_retries + 1
        if isinstance(error, httpx.TimeoutException):
            return RerankHTTPError(f"rerank request to {self.url} timed out after {self.timeout_s}s ({tries} tries)")
        if error is not None:
            return RerankHTTPError(f"rerank request to {self.url} failed after {tries} tries: {error}")
        assert response is not None
        return RerankHTTPError(
            f"rerank server {self.url} answered HTTP {response.status_code} after {tries} tries: "
            f"{response.text[:300]}"
        )

    def _next(
        self, attempt: int, response: Optional[httpx.Response], error: Optional[Exception], count: int
    ) -> Tuple[Optional[List[float]], float]:
        """(scores, 0) on success, (None, delay) to retry; raises on a final failure or when retries ran out."""
        scores = self._outcome(response, error, count)
        if scores is not None:
            return scores, 0.0
        if attempt >= self.max_retries:
            raise self._give_up(response, error)
        delay = self._delay(attempt, response)
        logger.info("rerank %s: retry %d/%d in %.2fs", self.url, attempt + 1, self.max_retries, delay)
        return None, delay

    # scorer API ------------------------------------------------------------------------------------
    def score(self, query: str, texts: Sequence[str]) -> List[float]:
        if not texts:
            return []
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout_s)
        body = build_payload(self.model, query, texts)
        for attempt in itertools.count():
            response, error = None, None
            try:
                response = self._client.post(self.url, json=body, headers=self._headers, timeout=self.timeout_s)
            except httpx.HTTPError as exc:
                error = exc
            scores, delay = self._next(attempt, response, error, len(texts))
            if scores is not None:
                return scores
            time.sleep(delay)
        raise AssertionError("unreachable")

    async def ascore(self, query: str, texts: Sequence[str]) -> List[float]:
        if not texts:
            return []
        # An AsyncClient is bound to the loop that first used it, so one is opened per call unless injected.
        if self._async_client is not None:
            return await self._ascore(self._async_client, query, texts)
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            return await self._ascore(client, query, texts)

    async def _ascore(self, client: httpx.AsyncClient, query: str, texts: Sequence[str]) -> List[float]:
        body = build_payload(self.model, query, texts)
        for attempt in itertools.count():
            response, error = None, None
            try:
                response = await client.post(self.url, json=body, headers=self._headers, timeout=self.timeout_s)
            except httpx.HTTPError as exc:
                error = exc
            scores, delay = self._next(attempt, response, error, len(texts))
            if scores is not None:
                return scores
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the sync client this scorer opened (an injected client is left to its owner)."""
        if self._client is not None and self._owns_client:
            self._client.close()
            self._client = None
