"""Tokens as the limits are counted: tiktoken's ``cl100k_base`` (LlamaIndex core's default tokenizer), read from the
cache core ships, so nothing is downloaded. A served model's own tokenizer differs; the budgets keep 5% slack."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, Tuple


@lru_cache(maxsize=1)
def encoding() -> Any:
    """The ``cl100k_base`` encoding from LlamaIndex core's bundled tiktoken cache (a set ``TIKTOKEN_CACHE_DIR``
    is used as it is)."""
    import llama_index.core
    import tiktoken

    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return tiktoken.get_encoding("cl100k_base")
    os.environ["TIKTOKEN_CACHE_DIR"] = os.path.join(os.path.dirname(llama_index.core.__file__), "_static",
                                                    "tiktoken_cache")
    try:
        return tiktoken.get_encoding("cl100k_base")
    finally:
        del os.environ["TIKTOKEN_CACHE_DIR"]


def count_tokens(text: str) -> int:
    """Tokens of ``text``."""
    return len(encoding().encode(text, disallowed_special=()))


def cut_to_tokens(text: str, max_tokens: int) -> Tuple[str, bool]:
    """``text`` cut to its first ``max_tokens`` tokens, and whether it was cut."""
    ids = encoding().encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text, False
    return encoding().decode(ids[:max_tokens]), True


__all__ = ["count_tokens", "cut_to_tokens", "encoding"]
