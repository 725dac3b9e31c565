"""``RowCache``: the fields a recalled message needs, kept per conversation, so that a recall skips the ``get`` of
candidates it wrote or read before.

Milvus stays the store of record: the searches find the candidates (filtered by owner and conversation), and the
cache only answers the ``get`` of their fields (:data:`~.episodic_schema.OUTPUT_FIELDS`, as the ``get`` returns
them). A conversation's entries are filled when the memory writes its messages (from what it wrote) and when a recall
reads candidates the cache lacks; a position written again is replaced; a deleted message (a position, a whole
conversation) is dropped, and so is everything when the collection is rebuilt. A position read and found without a
row (a neighbour never indexed: a failed answer, one past the last message) is remembered as absent, and asked again
only when a search finds it. A read that began before a delete
does not put its rows back (:meth:`RowCache.mark`). Only this process's writes and deletes are seen: a message
deleted by another process sharing the collection stays cached here until its conversation is forgotten.

Bounded: past ``max_rows`` positions in all, the least recently used conversations are forgotten. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Container, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.episodic_schema import OWN
from llama_index_convrag.memory.units import MemoryUnit

#: Rows cached by default, all conversations together: about 25 MB for LoCoMo's messages (~150 characters each), the
#: messages of 50 conversations of 1,000.
DEFAULT_CACHED_ROWS = 50_000

Scope = Tuple[str, str]
Row = Mapping[str, Any]
_UNKNOWN: Any = object()


def unit_row(unit: MemoryUnit) -> Dict[str, Any]:
    """The own-text row's fields a ``get`` of :data:`~.episodic_schema.OUTPUT_FIELDS` returns for ``unit`` (the
    values :func:`~.episodic.rows_of` writes)."""
    return {"id": unit.unit_id, "position": unit.position, "kind": OWN, "metadata": unit.metadata(),
            "owner": unit.owner, "conversation_id": unit.conversation_id}


class RowCache:
    """Per ``(owner, conversation_id)``: position -> row (or absent), least recently used conversations forgotten past
    ``max_rows`` positions in all (0: nothing is cached)."""

    def __init__(self, max_rows: int = DEFAULT_CACHED_ROWS) -> None:
        if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0:
            raise ConfigurationError(f"max_rows must be an int >= 0 (0 caches nothing), got {max_rows!r}")
        self._max = max_rows
        self._scopes: "OrderedDict[Scope, Dict[int, Optional[Row]]]" = OrderedDict()  # None: read, no row
        self._rows = 0
        self._deletes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._rows

    def split(self, scope: Scope, positions: Sequence[int],
              found_by_search: Container[int] = ()) -> Tuple[Dict[int, Row], List[int]]:
        """The cached rows of ``positions`` in ``scope``, and the positions to read (in the order given): those the
        cache lacks, and those remembered as absent that a search found (``found_by_search``: they have rows now)."""
        found: Dict[int, Row] = {}
        missing: List[int] = []
        with self._lock:
            rows = self._scopes.get(scope)
            if rows is not None:
                self._scopes.move_to_end(scope)
            for p in positions:
                row = rows.get(p, _UNKNOWN) if rows is not None else _UNKNOWN
                if row is _UNKNOWN or (row is None and p in found_by_search):
                    missing.append(p)
                elif row is not None:
                    found[p] = row
        return found, missing

    def mark(self) -> int:
        """A token for :meth:`put` of rows read from Milvus after this call (deletes since then refuse them)."""
        return self._deletes

    def put(self, scope: Scope, rows: Iterable[Row], mark: int = -1, absent: Iterable[int] = ()) -> None:
        """Cache ``rows`` (each with its ``position``) of ``scope``, and remember the positions ``absent`` (read
        without a row); with ``mark`` (from :meth:`mark`, taken before they were read), nothing when a delete came
        in between (a row read then may be gone)."""
        if self._max == 0:
            return
        with self._lock:
            if mark >= 0 and mark != self._deletes:
                return
            cached = self._scopes.setdefault(scope, {})
            self._scopes.move_to_end(scope)
            before = len(cached)
            for p in absent:
                cached[p] = None
            for row in rows:
                cached[int(row["position"])] = row
            self._rows += len(cached) - before
            while self._rows > self._max and self._scopes:
                _, gone = self._scopes.popitem(last=False)
                self._rows -= len(gone)

    def drop(self, scope: Scope, positions: Iterable[int]) -> None:
        """Forget the rows of ``positions`` in ``scope`` (their messages were deleted)."""
        with self._lock:
            self._deletes += 1
            cached = self._scopes.get(scope)
            if cached is not None:
                for p in positions:
                    self._rows -= cached.pop(p, _UNKNOWN) is not _UNKNOWN

    def forget(self, scope: Scope) -> None:
        """Forget every row of ``scope`` (the conversation was deleted)."""
        with self._lock:
            self._deletes += 1
            self._rows -= len(self._scopes.pop(scope, {}))

    def clear(self) -> None:
        """Forget everything (the collection was rebuilt)."""
        with self._lock:
            self._deletes += 1
            self._scopes.clear()
            self._rows = 0


__all__ = ["DEFAULT_CACHED_ROWS", "RowCache", "unit_row"]
