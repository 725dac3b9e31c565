"""Which embedding model (and variant) wrote a collection's vectors: the name a collection records and checks.

:func:`embed_model_id` is the model's own ``embed_model_id`` when it has one (:class:`LocalMiniLMEmbedding` names its
variant), else its class and ``model_name`` (plus ``dimensions`` when the model sets them, as OpenAI's models may).
Two models with different ids write vectors that must not share a collection (``milvus.schema.check_embed_model``).
"""

from __future__ import annotations

from typing import Any, Optional


def embed_model_id(model: Any) -> Optional[str]:
    """The id a collection records for vectors written by ``model`` (None for no model)."""
    if model is None:
        return None
    own = getattr(model, "embed_model_id", None)
    if isinstance(own, str) and own:
        return own
    name = f"{type(model).__name__}:{getattr(model, 'model_name', None) or 'unnamed'}"
    dims = getattr(model, "dimensions", None)
    return f"{name}:{dims}" if isinstance(dims, int) and not isinstance(dims, bool) else name
