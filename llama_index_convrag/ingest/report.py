"""What one ingest run did: :class:`IngestReport` (``str()`` for people, :meth:`IngestReport.to_json` for programs)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple


@dataclass
class IngestReport:
    """What one ingest run did; ``str()`` is a summary, :meth:`to_json` a JSON object.

    ``unchanged`` lists files already stored with the same content; files that were not ingested are in
    ``unsupported`` (no reader, binary) or ``failed`` (the parser or the file system failed), each with a reason.
    ``embed_seconds`` and ``insert_seconds`` add up the time of every embedding request and insert (requests run
    concurrently, so their sum may exceed ``total_seconds``). After an interruption ``added``/``updated`` hold only
    documents stored completely, ``incomplete`` lists documents of which some chunks but not all were stored, and
    ``not_reached`` counts the other files none of whose chunks were stored (a replaced document keeps its old
    version until its first new chunk is stored).
    """

    collection_name: str
    added: List[str] = field(default_factory=list)
    updated: List[str] = field(default_factory=list)
    unchanged: List[str] = field(default_factory=list)
    deleted: List[str] = field(default_factory=list)
    unsupported: List[Tuple[str, str]] = field(default_factory=list)
    failed: List[Tuple[str, str]] = field(default_factory=list)
    chunks: int = 0
    embed_seconds: float = 0.0
    insert_seconds: float = 0.0
    total_seconds: float = 0.0
    embed_window: Optional[int] = None
    over_window: int = 0
    interrupted: bool = False
    incomplete: List[str] = field(default_factory=list)
    not_reached: int = 0

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["unsupported"] = [{"path": p, "reason": r} for p, r in self.unsupported]
        d["failed"] = [{"path": p, "reason": r} for p, r in self.failed]
        return d

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @property
    def chunks_per_second(self) -> float:
        """Chunks stored per second of the whole run."""
        return self.chunks / self.total_seconds if self.total_seconds > 0 else 0.0

    def __str__(self) -> str:
        lines = [
            f"collection {self.collection_name}: {len(self.added)} added, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged, {len(self.deleted)} deleted, {len(self.unsupported)} unsupported, "
            f"{len(self.failed)} failed",
            f"{self.chunks} chunks; embedding {self.embed_seconds:.1f} s, insert {self.insert_seconds:.1f} s, "
            f"total {self.total_seconds:.1f} s",
        ]
        if self.over_window:
            lines.append(f"  {self.over_window} of {self.chunks} chunks exceed the embedding model's window of "
                         f"{self.embed_window} tokens (dense vectors see their start only)")
        lines += [f"  unsupported: {p} ({r})" for p, r in self.unsupported]
        lines += [f"  failed: {p} ({r})" for p, r in self.failed]
        if self.interrupted:
            lines.append(f"interrupted after {self.total_seconds:.1f} s: kept {len(self.added) + len(self.updated)} "
                         f"documents completely ({self.chunks} chunks); {len(self.incomplete)} partly stored, "
                         f"{self.not_reached} files not stored; re-run the same command to resume (stored files "
                         f"are skipped)")
        return "\n".join(lines)
