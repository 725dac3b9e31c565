"""Bi-encoder re-scoring with an embedding model over the full text of each chunk (the offline default).

A first-stage dense search embeds each chunk once, truncated to the model's window (256 tokens for MiniLM; many
passages are longer). Re-embedding the same truncated text would reproduce the first-stage order, so this
scorer slides word windows over the whole chunk and pools the window similarities (max pooling is MaxP from Dai &
Callan, "Deeper Text Understanding for IR with Contextual Neural Language Modeling", SIGIR 2019).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.postprocessors.scorers.base import Scorer

POOLINGS = ("max", "mean")


def split_windows(text: str, window_words: Optional[int], overlap_words: int) -> List[str]:
    """Overlapping word windows covering ``text``; the whole text when ``window_words`` is None or not exceeded."""
    words = text.split()
    if window_words is None or len(words) <= window_words:
        return [text]
    step = window_words - overlap_words
    starts = list(range(0, len(words) - overlap_words, step))
    return [" ".join(words[s : s + window_words]) for s in starts]


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.clip(norms, 1e-12, None)


def pool_scores(query: Sequence[float], windows: Sequence[np.ndarray], pooling: str) -> List[float]:
    """Cosine of the query with each text's window vectors, pooled per text by ``max`` or ``mean``."""
    q = _unit(np.asarray(query, dtype=np.float64))
    out = []
    for mat in windows:
        sims = _unit(np.asarray(mat, dtype=np.float64)) @ q
        out.append(float(sims.max() if pooling == "max" else sims.mean()))
    return out


class EmbeddingScorer(Scorer):
    """Cosine similarity between the query and each text's word windows, pooled per text."""

    def __init__(
        self,
        embed_model: BaseEmbedding,
        *,
        window_words: Optional[int] = 150,
        overlap_words: int = 30,
        pooling: str = "max",
        cache_size: int = 4096,
    ) -> None:
        if window_words is not None and window_words < 1:
            raise ConfigurationError(f"window_words must be >= 1 or None (whole text), got {window_words!r}")
        if window_words is not None and not 0 <= overlap_words <= window_words - 1:
            upper = window_words - 1
            raise ConfigurationError(f"overlap_words must be in [0, {upper}] (window_words - 1), got {overlap_words!r}")
        if pooling not in POOLINGS:
            raise ConfigurationError(f"pooling must be one of {list(POOLINGS)}, got {pooling!r}")
        if cache_size < 0:
            raise ConfigurationError(f"cache_size must be >= 0, got {cache_size!r}")
        self.embed_model = embed_model
        self.window_words = window_words
        self.overlap_words = overlap_words
        self.pooling = pooling
        self.cache_size = cache_size
        self._cache: "OrderedDict[str, np.ndarray]" = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_defaults(cls, embed_model: Optional[BaseEmbedding] = None, **kwargs: object) -> "EmbeddingScorer":
        """The local MiniLM model unless ``embed_model`` is given (never a hosted model by surprise)."""
        if embed_model is None:
            embed_model = LocalMiniLMEmbedding()
        return cls(embed_model, **kwargs)  # type: ignore[arg-type]

    @property
    def name(self) -> str:
        return f"embedding:{self.embed_model.model_name}"

    # pure helpers shared by the twins ------------------------------------------------------------
    def _lookup(self, texts: Sequence[str]) -> Tuple[Dict[str, np.ndarray], Dict[str, List[str]]]:
        """(cached window vectors, windows of the texts still to embed)."""
        known: Dict[str, np.ndarray] = {}
        missing: Dict[str, List[str]] = {}
        with self._lock:
            for text in dict.fromkeys(texts):
                if text in self._cache:
                    known[text] = self._cache[text]
                else:
                    missing[text] = split_windows(text, self.window_words, self.overlap_words)
        return known, missing

    def _store(
        self, known: Dict[str, np.ndarray], missing: Dict[str, List[str]], vectors: Sequence[Sequence[float]]
    ) -> Dict[str, np.ndarray]:
        pos = 0
        for text, windows in missing.items():
            known[text] = np.asarray(vectors[pos : pos + len(windows)], dtype=np.float32)
            pos += len(windows)
        if self.cache_size:
            with self._lock:
                for text in missing:
                    self._cache[text] = known[text]
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return known

    # cache persistence ---------------------------------------------------------------------------
    def cached_windows(self) -> Dict[str, np.ndarray]:
        """A copy of the cache: text -> (windows x dim) vectors, e.g. to save between runs."""
        with self._lock:
            return dict(self._cache)

    def add_to_cache(self, windows: Dict[str, np.ndarray]) -> None:
        """Seed the cache with window vectors computed by the same model and window settings."""
        with self._lock:
            for text, mat in windows.items():
                self._cache[text] = np.asarray(mat, dtype=np.float32).reshape(-1, np.shape(mat)[-1])
                self._cache.move_to_end(text)
            while self.cache_size and len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    # scorer API ------------------------------------------------------------------------------------
    def score(self, query: str, texts: Sequence[str]) -> List[float]:
        known, missing = self._lookup(texts)
        flat = [w for windows in missing.values() for w in windows]
        vectors = self.embed_model.get_text_embedding_batch(flat) if flat else []
        known = self._store(known, missing, vectors)
        q = self.embed_model.get_query_embedding(query)
        return pool_scores(q, [known[t] for t in texts], self.pooling)

    async def ascore(self, query: str, texts: Sequence[str]) -> List[float]:
        known, missing = self._lookup(texts)
        flat = [w for windows in missing.values() for w in windows]
        vectors = await self.embed_model.aget_text_embedding_batch(flat) if flat else []
        known = self._store(known, missing, vectors)
        q = await self.embed_model.aget_query_embedding(query)
        return pool_scores(q, [known[t] for t in texts], self.pooling)
