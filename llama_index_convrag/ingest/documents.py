"""The documents stored in an ingested collection: list them (with whether their file still exists) and remove them.

``Ingestor.run(..., delete_missing=True)`` only looks under the folders given to that run; these functions see every
document of the collection, so the files of a renamed or deleted folder can be found and removed too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from pymilvus import MilvusClient

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.milvus.schema import detect_spec
from llama_index_convrag.milvus.filters import quote_string

PAGE = 1000


@dataclass(frozen=True)
class StoredDocument:
    """One document of a collection: its id (the file's resolved POSIX path when ingested by us), its stored chunks
    and, when ingest recorded it, how many it has (``chunk_count``): fewer stored means a half-stored document."""

    doc_id: str
    chunks: int
    exists: bool
    expected_chunks: Optional[int] = None

    @property
    def complete(self) -> bool:
        return self.expected_chunks is None or self.chunks == self.expected_chunks

    def to_dict(self) -> Dict[str, Any]:
        return {**asdict(self), "complete": self.complete}


def _fields(client: MilvusClient, collection_name: str) -> Tuple[str, Optional[str]]:
    """(document id field, metadata field or None)."""
    spec = detect_spec(client, collection_name)
    if spec.doc_id_field is None:
        raise ConfigurationError(f"collection {collection_name!r} has no document id field (layout {spec.layout!r}); "
                         f"documents can only be listed in collections with one")
    return spec.doc_id_field, spec.metadata_field


def _doc_id_field(client: MilvusClient, collection_name: str) -> str:
    return _fields(client, collection_name)[0]


def under(doc_id: str, folder: Path) -> bool:
    """True when ``doc_id`` is ``folder`` itself or a path below it (compared as POSIX paths)."""
    root = folder.as_posix().rstrip("/")
    return doc_id == root or doc_id.startswith(root + "/")


def list_documents(client: MilvusClient, collection_name: str, *, folder: Optional[Path] = None,
                   missing_only: bool = False) -> List[StoredDocument]:
    """Documents of ``collection_name`` sorted by id (those under ``folder``; only vanished files if asked)."""
    field, meta = _fields(client, collection_name)
    counts: Dict[str, int] = {}
    expected: Dict[str, int] = {}
    it = client.query_iterator(collection_name, batch_size=PAGE, filter=f'{field} != ""',
                               output_fields=[field] if meta is None else [field, meta])
    try:
        while True:
            batch = it.next()
            if not batch:
                break
            for row in batch:
                counts[row[field]] = counts.get(row[field], 0) + 1
                total = (row.get(meta) or {}).get("chunk_count") if meta is not None else None
                if isinstance(total, int):
                    expected[row[field]] = total
    finally:
        it.close()
    docs = []
    for doc_id in sorted(counts):
        if folder is not None and not under(doc_id, folder):
            continue
        exists = Path(doc_id).exists()
        if missing_only and exists:
            continue
        docs.append(StoredDocument(doc_id=doc_id, chunks=counts[doc_id], exists=exists,
                                   expected_chunks=expected.get(doc_id)))
    return docs


def remove_documents(client: MilvusClient, collection_name: str, doc_ids: Iterable[str]) -> int:
    """Delete every chunk of ``doc_ids``; returns how many documents were given."""
    field = _doc_id_field(client, collection_name)
    n = 0
    for doc_id in doc_ids:
        client.delete(collection_name, filter=f"{field} == {quote_string(doc_id)}")
        n += 1
    return n
