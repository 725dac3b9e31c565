"""The server's startup heap, kept out of the garbage collector's full scans.

What a server builds before its first request (the embedding model, the engines, the imported modules: about
300,000 objects for the serve tests' app) lives as long as the process. A full collection walks every tracked object,
so without this each one walks the whole startup heap again: in ``bench/serve_load.py``'s in-process engine at 32
conversations, one full collection per 128 turns cost 7.8 to 9.2 ms a turn (load average 20). :func:`freeze_heap`
collects once, then moves every object alive into the collector's permanent generation (``gc.freeze``); later
collections walk only what requests made. :func:`thaw_heap` undoes it at shutdown.
"""

from __future__ import annotations

import gc


def freeze_heap() -> int:
    """Collect, then freeze every object alive now (``gc.freeze``); how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def thaw_heap() -> None:
    """Return the frozen objects to the collector's scans (``gc.unfreeze``)."""
    gc.unfreeze()


__all__ = ["freeze_heap", "thaw_heap"]
