"""Chunks the embedding model reads whole: chunk sizes counted in the model's own tokens, sized from its window.

* With no ``chunk_size`` the chunk size is the model's window (``max_input_tokens``) less the tokens it adds to
  every input (``special_tokens``), counted with the model's tokenizer (``token_spans``), so each chunk's dense
  vector reads all of it. A model that cannot tokenize gets its window (at most :data:`FALLBACK_CHUNK_SIZE`) in
  tokens of the splitter's default tokenizer; one that states no window gets :data:`FALLBACK_CHUNK_SIZE` (the
  pipeline then warns that it cannot tell).
* A given ``chunk_size`` is honoured, in the model's tokens when it can tokenize. One larger than the window is
  the user's choice (the pipeline counts and reports the chunks past the window).
* The sentence splitter adds up the token counts of its pieces; with the model's own WordPiece tokenizer the sum
  is the count of the joined chunk (pieces end at whitespace or punctuation, where WordPiece splits too).
* Chunks are embedded without metadata (``MetadataMode.NONE``), so :class:`TextOnlySplitter` does not count it:
  metadata never makes a small chunk size fail a file.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from llama_index.core.node_parser import SentenceSplitter

from llama_index_convrag.embeddings.windows import model_window
from llama_index_convrag.errors import ConfigurationError

#: Chunk size (tokens of the splitter's default tokenizer) for a model that states no window.
FALLBACK_CHUNK_SIZE = 700
#: The most tokens neighbouring chunks share; a smaller chunk shares an eighth of itself.
DEFAULT_CHUNK_OVERLAP = 50


class ContentTokens:
    """The model's tokenizer as the splitter wants it (text -> its content tokens). A picklable object, not a
    closure, so the splitter keeps counting in the model's tokens in reader processes and Ray workers."""

    def __init__(self, embed_model: Any) -> None:
        self.embed_model = embed_model

    def __call__(self, text: str) -> List[Any]:
        return self.embed_model.token_spans(text)[0]


def model_tokenizer(embed_model: Any) -> Optional[Callable[[str], List[Any]]]:
    """The model's tokenizer as the splitter wants it (text -> its content tokens), or None when it has none."""
    if not callable(getattr(embed_model, "token_spans", None)):
        return None
    return ContentTokens(embed_model)


def window_chunk_size(embed_model: Any) -> Optional[int]:
    """Content tokens one input window of the model holds (window less special tokens); None when it is unknown."""
    window = model_window(embed_model)
    if window is None or model_tokenizer(embed_model) is None:
        return None
    return window - int(getattr(embed_model, "special_tokens", 0))


def default_overlap(chunk_size: int) -> int:
    """Tokens neighbouring chunks share by default: an eighth of the chunk, at most :data:`DEFAULT_CHUNK_OVERLAP`."""
    return min(DEFAULT_CHUNK_OVERLAP, chunk_size // 8)


class TextOnlySplitter(SentenceSplitter):
    """A :class:`SentenceSplitter` whose chunk size counts the text only: ingest embeds chunks without their
    metadata, so a long path never shrinks (or fails) a chunk, and LlamaIndex's "Metadata length ... is close to
    chunk size" notice is never printed to stdout."""

    @classmethod
    def class_name(cls) -> str:
        return "TextOnlySplitter"

    def split_text_metadata_aware(self, text: str, metadata_str: str) -> List[str]:
        return self.split_text(text)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        # LlamaIndex rebuilds a component from its fields on unpickling, which would count in its default tokenizer
        super().__setstate__(state)
        tokenizer = (state.get("__pydantic_private__") or {}).get("_tokenizer")
        if tokenizer is not None:
            self._tokenizer = tokenizer


def build_splitter(embed_model: Any, chunk_size: Optional[int] = None,
                   chunk_overlap: Optional[int] = None) -> SentenceSplitter:
    """The ingest splitter for ``embed_model``: see the module docstring for how ``None`` values are chosen."""
    if chunk_size is not None and chunk_size < 1:
        raise ConfigurationError(f"chunk_size must be >= 1 token, got {chunk_size!r}")
    fits = window_chunk_size(embed_model)
    if fits is None:  # no tokenizer to count with: the splitter's default one, within a stated window
        window = model_window(embed_model)
        fits = FALLBACK_CHUNK_SIZE if window is None else min(FALLBACK_CHUNK_SIZE, window)
    size = chunk_size if chunk_size is not None else fits
    overlap = chunk_overlap if chunk_overlap is not None else default_overlap(size)
    if not 0 <= overlap < size:
        raise ConfigurationError(f"chunk_overlap must be in [0, {size - 1}] (chunk size - 1), got {overlap!r}")
    return TextOnlySplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=model_tokenizer(embed_model))
