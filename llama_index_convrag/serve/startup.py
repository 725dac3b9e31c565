"""What a server does once before its first request: load the text rules' models, then keep its heap out of the
garbage collector's full scans.

The text rules load their models and lists on first use (py3langid's model, NLTK's stop lists, which import SciPy,
the Snowball stemmer): done by the first turn, that stalls the event loop, and every turn in flight with it, for
about a second (128 ms a turn over the first 128 turns at 32 conversations in ``bench/serve_load.py``'s in-process
engine, profiled, load average 20). :func:`preload_text_rules` loads them at startup instead.

What the server has built by then (the embedding model, the engines, the modules: about 300,000 tracked objects in
the serve tests' app) lives as long as the process, yet each full collection walks it again: one per about 128 turns
at 32 conversations, 7.8 to 9.2 ms a turn (same bench and load). :func:`freeze_heap` collects once and moves
everything alive into the collector's permanent generation (``gc.freeze``); later collections walk only what
requests made. :func:`thaw_heap` undoes it at shutdown.
"""

from __future__ import annotations

import gc

from llama_index_convrag.text import identify, sentence_spans
from llama_index_convrag.text.words import terms

#: what :func:`preload_text_rules` reads (an English question: the identifier, the stop lists and a stemmer)
SAMPLE = "What does the first passage say about the harvest?"


def preload_text_rules(sample: str = SAMPLE) -> None:
    """Load the text rules' models and lists by reading ``sample`` as a turn does (language, terms, sentences)."""
    identify(sample)
    terms(sample)
    sentence_spans(sample)


def freeze_heap() -> int:
    """Collect, then freeze every object alive now (``gc.freeze``); how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def thaw_heap() -> None:
    """Return the frozen objects to the collector's scans (``gc.unfreeze``)."""
    gc.unfreeze()


__all__ = ["SAMPLE", "freeze_heap", "preload_text_rules", "thaw_heap"]
