"""Embedding models that run offline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "EMBED_DIM": "local",
    "LocalMiniLMEmbedding": "local",
    "Int8Recipe": "quantize",
    "embed_model_id": "identity",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.embeddings.identity import embed_model_id
    from llama_index_convrag.embeddings.local import EMBED_DIM, LocalMiniLMEmbedding
    from llama_index_convrag.embeddings.quantize import Int8Recipe
