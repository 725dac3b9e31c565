"""``convrag serve``: the chat engine behind HTTP (FastAPI): an OpenAI-compatible endpoint and the conversation API
(docs/SERVE.md). Needs the ``serve`` extra."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "create_app": "app",
    "Limits": "state",
    "RateLimits": "ratelimit",
    "DocumentBackend": "documents",
    "EnginesPerCollection": "engines",
    "shared_engine_for": "engines",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.serve.app import create_app
    from llama_index_convrag.serve.documents import DocumentBackend
    from llama_index_convrag.serve.engines import EnginesPerCollection, shared_engine_for
    from llama_index_convrag.serve.ratelimit import RateLimits
    from llama_index_convrag.serve.state import Limits
