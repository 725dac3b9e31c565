"""Moved to :mod:`llama_index_convrag.milvus.filters`; this path keeps the documented ``retrievers.filters``
module importable."""

from llama_index_convrag.milvus.filters import (  # noqa: F401
    SUPPORTED_OPERATORS,
    combine,
    filters_to_expr,
    literal,
    quote_string,
)

__all__ = ["SUPPORTED_OPERATORS", "combine", "filters_to_expr", "literal", "quote_string"]
