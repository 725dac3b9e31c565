"""Pure token budgeting: how many tokens a window has left for context, and how to fill windows exactly.

Core's ``PromptHelper.repack`` measures a template with every unfilled variable set to ``""``, so long extra
variables (``{chat_history}``, ``{tone_name}``) are packed as if empty and overflow the window. Here the caller
measures the template *with* the query and the extra variables filled, and this module does the arithmetic.

Chunks are packed as token-id sequences, in order, filling every window to the budget and splitting a chunk
only where a window is full. There is no overlap, so ``len(pack(...)) == lower_bound_calls(...)`` exactly. Used by
tree_summarize, simple_summarize and the per-chunk fitting of refine and accumulate; the compact modes split as core
does (``compact.py``), with the prompt measured filled.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Callable, List, Protocol, Sequence
from llama_index_convrag.errors import ConfigurationError

CHUNK_SEPARATOR = "\n\n"
#: Texts whose token ids :class:`TiktokenTokenizer` keeps (least recently used dropped first).
ENCODE_CACHE_SIZE = 1024


class Tokenizer(Protocol):
    """Encodes text to token ids and back."""

    def encode(self, text: str) -> List[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass(frozen=True)
class TiktokenTokenizer:
    """The tokenizer LlamaIndex core counts with by default (tiktoken's gpt-3.5-turbo encoding)."""

    model: str = "gpt-3.5-turbo"

    def _enc(self):  # type: ignore[no-untyped-def]
        return _encoding(self.model)

    def encode(self, text: str) -> List[int]:
        return list(_encode(self.model, text))

    def decode(self, ids: Sequence[int]) -> str:
        return self._enc().decode(list(ids))

    def is_same_encoding(self, tokenize: Callable[[str], List[int]]) -> bool:
        """Whether ``tokenize`` is core's default tokenizer for this model (``partial(encoding.encode,
        allowed_special="all")``, as ``llama_index.core.utils.get_tokenizer`` builds it): the same ids as ``encode``."""
        return (isinstance(tokenize, partial) and tokenize.keywords == {"allowed_special": "all"}
                and not tokenize.args and getattr(tokenize.func, "__self__", None) is self._enc())


@lru_cache(maxsize=ENCODE_CACHE_SIZE)
def _encode(model: str, text: str) -> "array[int]":
    """Token ids of ``text``, remembered: a conversation sends the same retrieved chunks turn after turn (and the
    synthesizer counts, packs and counts again), so each is encoded once. Stored as a compact uint32 array."""
    return array("I", _encoding(model).encode(text, allowed_special="all"))


@lru_cache(maxsize=4)
def _encoding(model: str):  # type: ignore[no-untyped-def]
    """tiktoken's encoding, read from the cache LlamaIndex core ships (as ``get_tokenizer`` does): no download."""
    import os

    import llama_index.core
    import tiktoken

    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return tiktoken.encoding_for_model(model)
    bundled = os.path.join(os.path.dirname(llama_index.core.__file__), "_static", "tiktoken_cache")
    os.environ["TIKTOKEN_CACHE_DIR"] = bundled
    try:
        return tiktoken.encoding_for_model(model)
    finally:
        del os.environ["TIKTOKEN_CACHE_DIR"]


def context_budget(
    context_window: int,
    num_output: int,
    prompt_tokens: int,
    padding: int,
    chunk_size_limit: int | None = None,
) -> int:
    """Tokens left for context in one call; raises naming every term when nothing is left."""
    budget = context_window - num_output - prompt_tokens - padding
    if chunk_size_limit is not None:
        budget = min(budget, chunk_size_limit)
    if budget <= 0:
        raise ConfigurationError(
            f"no room for context: context_window {context_window} - num_output {num_output} - prompt "
            f"{prompt_tokens} tokens (template, query, extra variables, reserved room) - padding {padding} = {budget}; "
            "shorten the extra variables or use an LLM with a larger context_window"
        )
    return budget


def pack_token_ids(chunks: Sequence[Sequence[int]], budget: int) -> List[List[int]]:
    """Fill windows of ``budget`` tokens with the chunks in order, splitting a chunk only where a window is full."""
    if budget <= 0:
        raise ConfigurationError(f"budget must be positive, got {budget}")
    windows: List[List[int]] = []
    current: List[int] = []
    for chunk in chunks:
        rest = list(chunk)
        while rest:
            room = budget - len(current)
            current.extend(rest[:room])
            rest = rest[room:]
            if len(current) == budget:
                windows.append(current)
                current = []
    if current:
        windows.append(current)
    return windows


def lower_bound_calls(total_tokens: int, budget: int) -> int:
    """The fewest calls that can show ``total_tokens`` of context through windows of ``budget`` tokens."""
    return math.ceil(total_tokens / budget) if total_tokens > 0 else 0


def render_chunks(texts: Sequence[str]) -> List[str]:
    """Strip chunks, drop empty ones, and end each with the separator so that packed windows read naturally."""
    return [t.strip() + CHUNK_SEPARATOR for t in texts if t.strip()]


def pack_texts(texts: Sequence[str], budget: int, tokenizer: Tokenizer) -> List[str]:
    """Pack rendered text chunks into window texts of at most ``budget`` tokens each (as counted).

    When everything fits in one window and the tokenizer round-trips exactly (tiktoken's byte-level BPE: decoding
    concatenated encodings gives the concatenated texts), the window is the joined texts, without decoding."""
    encoded = [tokenizer.encode(t) for t in texts]
    if isinstance(tokenizer, TiktokenTokenizer) and 0 < sum(len(e) for e in encoded) <= budget:
        return ["".join(texts).strip()]
    windows = pack_token_ids(encoded, budget)
    return [tokenizer.decode(w).strip() for w in windows]


def count_tokens(texts: Sequence[str], tokenizer: Tokenizer) -> int:
    """Total tokens of ``texts``, each encoded on its own (as :func:`pack_texts` counts them)."""
    return sum(len(tokenizer.encode(t)) for t in texts)


TokenCounter = Callable[[str], int]
