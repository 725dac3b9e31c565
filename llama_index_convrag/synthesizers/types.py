"""Response modes: the same names and meanings as LlamaIndex core's ``ResponseMode``."""

from __future__ import annotations

from enum import Enum


class ResponseMode(str, Enum):
    """How a synthesizer turns retrieved chunks into an answer."""

    REFINE = "refine"
    """One LLM call per chunk: answer from the first, then refine the answer with each next chunk."""

    COMPACT = "compact"
    """Pack chunks to fill the usable window (extra variables counted), then refine across the packed windows."""

    SIMPLE_SUMMARIZE = "simple_summarize"
    """Join every chunk into one prompt (truncated to the window) and make one LLM call."""

    TREE_SUMMARIZE = "tree_summarize"
    """Pack chunks, summarise each window, repack the summaries and recurse until one window answers."""

    GENERATION = "generation"
    """Ignore the context and answer the query with one LLM call."""

    NO_TEXT = "no_text"
    """Return the source nodes only: no LLM call, empty answer text."""

    CONTEXT_ONLY = "context_only"
    """Return the chunks joined by blank lines: no LLM call."""

    ACCUMULATE = "accumulate"
    """Answer the query once per chunk and join the answers."""

    COMPACT_ACCUMULATE = "compact_accumulate"
    """Pack chunks to fill the window first, then answer once per packed window and join the answers."""

    EXTRACTIVE = "extractive"
    """Our addition: no LLM; the retrieved sentences most similar to the query, in document order, with ``[n]``."""
