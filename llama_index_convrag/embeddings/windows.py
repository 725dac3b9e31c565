"""Dense windows: cut a text into spans that each fit an embedding model's input window.

An embedding model silently truncates what exceeds its window (256 word pieces for all-MiniLM-L6-v2), so the
vector of a long chunk describes only its beginning. :func:`window_starts` is the pure rule (fixed-size windows,
``overlap`` tokens shared by neighbours, the last window ending at the last token, starts moved back to a word
start); :func:`window_spans` applies it to a model that exposes its tokenizer, :func:`model_window` reads the
window from the model (never assumed: a model that does not state one gives ``None``).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple
from llama_index_convrag.errors import ConfigurationError

Span = Tuple[int, int]


def model_window(embed_model: Any) -> Optional[int]:
    """The model's input window in tokens (``max_input_tokens``), or ``None`` when the model does not state it."""
    value = getattr(embed_model, "max_input_tokens", None)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def window_starts(n_tokens: int, size: int, overlap: int, word_starts: Optional[Sequence[bool]] = None) -> List[int]:
    """First-token indices of windows of ``size`` tokens covering ``n_tokens`` tokens.

    Neighbouring windows share at least ``overlap`` tokens; the last window ends at the last token (no short tail
    window); with ``word_starts`` (one flag per token) a start inside a word moves back to the word's first piece.
    """
    if size < 1:
        raise ConfigurationError(f"window size must be >= 1 token, got {size!r}")
    if not 0 <= overlap < size:
        raise ConfigurationError(f"overlap must be in [0, {size - 1}] (window size - 1), got {overlap!r}")
    if n_tokens <= size:
        return [0]
    step = size - overlap
    starts = list(range(0, n_tokens - size, step)) + [n_tokens - size]
    if word_starts is not None:
        moved = []
        for s in starts:
            t = s
            while t > 0 and not word_starts[t] and s - t < step // 2:
                t -= 1
            moved.append(t if word_starts[t] else s)
        starts = moved
    out: List[int] = []
    for s in starts:  # moving back may create duplicates; keep order
        if not out or s > out[-1]:
            out.append(s)
    return out


def window_spans(text: str, embed_model: Any, overlap: int) -> List[Span]:
    """Character spans of ``text``, each within the model's window, together covering all of it.

    ``embed_model`` must offer ``max_input_tokens`` and ``token_spans(text)`` (character spans of the content
    tokens plus per-token word-start flags, as :class:`~llama_index_convrag.embeddings.local.LocalMiniLMEmbedding`
    does) and ``special_tokens`` (tokens the model adds to every input, e.g. [CLS] and [SEP]).
    """
    window = model_window(embed_model)
    if window is None:
        raise ConfigurationError(f"{type(embed_model).__name__} does not state max_input_tokens; cannot cut windows")
    size = window - int(getattr(embed_model, "special_tokens", 0))
    spans, word_starts = embed_model.token_spans(text)
    if len(spans) <= size:
        return [(0, len(text))]
    n, out = len(spans), []
    for s in window_starts(n, size, min(overlap, size - 1), word_starts):
        e = min(s + size, n)
        while s + 1 < e < n and not word_starts[e]:  # end before a word that the window would cut
            e -= 1
        out.append((spans[s][0] if s > 0 else 0, spans[e - 1][1] if e < n else len(text)))
    return out


def count_over_window(embed_model: Any, texts: Sequence[str]) -> Tuple[Optional[int], int]:
    """``(window, n)``: the model's window and how many ``texts`` exceed it (``(None, 0)`` when the model states no
    window or cannot count its tokens; the caller then cannot tell and should say so)."""
    window = model_window(embed_model)
    counter = getattr(embed_model, "count_tokens", None)
    if window is None or not callable(counter):
        return None, 0
    return window, sum(1 for n in counter(list(texts)) if n > window)
