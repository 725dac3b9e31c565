"""A sentence-transformers CrossEncoder loaded from a local folder (extra ``rerank-st``; never a hub download).

The path is checked when the scorer is built; the model (and torch) load on the first call, with
``local_files_only=True`` so a missing file fails instead of reaching the network.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, List, Optional, Sequence, Union

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.postprocessors.scorers.base import Scorer, ScorerError

INSTALL_HINT = "pip install 'llama-index-convrag[rerank-st]' (sentence-transformers and torch)"


def load_cross_encoder_class() -> Any:
    """``sentence_transformers.CrossEncoder``, or an ImportError that says how to install it."""
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as exc:
        raise ImportError(f"CrossEncoderScorer needs sentence-transformers: {INSTALL_HINT}") from exc
    return CrossEncoder


def check_model_dir(model_path: Union[str, Path]) -> Path:
    """The model folder as a Path; ValueError when it is not a local folder with a ``config.json``."""
    path = Path(model_path).expanduser()
    if not path.is_dir():
        raise ConfigurationError(
            f"model_path must be an existing local folder holding a cross-encoder (no hub downloads), "
            f"got {str(model_path)!r}"
        )
    if not (path / "config.json").is_file():
        raise ConfigurationError(f"model_path {str(path)!r} has no config.json: not a saved sentence-transformers model")
    return path


class CrossEncoderScorer(Scorer):
    """Scores (query, text) pairs with a local cross-encoder. Needs torch; untested in this repository's CI."""

    def __init__(
        self,
        model_path: Union[str, Path],
        *,
        max_length: int = 512,
        batch_size: int = 32,
        device: Optional[str] = None,
    ) -> None:
        if max_length < 1:
            raise ConfigurationError(f"max_length must be >= 1, got {max_length!r}")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size!r}")
        self.model_path = check_model_dir(model_path)
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"cross-encoder:{self.model_path.name}"

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                cross_encoder = load_cross_encoder_class()
                try:
                    self._model = cross_encoder(
                        str(self.model_path), max_length=self.max_length, device=self.device,
                        local_files_only=True,
                    )
                except OSError as exc:
                    raise ScorerError(f"could not load cross-encoder from {str(self.model_path)!r}: {exc}") from exc
            return self._model

    def score(self, query: str, texts: Sequence[str]) -> List[float]:
        if not texts:
            return []
        scores = self._load().predict([(query, t) for t in texts], batch_size=self.batch_size,
                                      show_progress_bar=False)
        return [float(s) for s in scores]
