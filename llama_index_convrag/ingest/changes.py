"""Change detection against a collection: what is stored for each file, and which stored files vanished.

A document's stored state is the ``content_hash`` in its chunks' metadata, checked against ``chunk_count`` (a
document with missing chunks, e.g. after an interrupted run, reads as ``""`` so that it is redone). One query asks
for a window of :data:`LOOKUP_WINDOW` documents; a window whose chunks pass Milvus' query limit is asked one document
at a time, and a single document past the limit is counted by Milvus.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from pymilvus import MilvusClient

from llama_index_convrag.milvus.filters import quote_string
from llama_index_convrag.milvus.schema import CollectionSpec

#: Files whose stored hashes one query fetches; one query per file cost about half of the ingest time with a fast
#: embedding server.
LOOKUP_WINDOW = 64
#: Milvus' largest query ``limit`` (offset + limit <= 16384).
QUERY_LIMIT = 16384


def stored_hashes(client: MilvusClient, collection_name: str, spec: CollectionSpec, doc_ids: Sequence[str],
                  timeout: Optional[float] = None) -> Dict[str, Optional[str]]:
    """The stored content hash of each of ``doc_ids`` (``None`` if absent, ``""`` if incomplete); ``timeout``:
    seconds each query may take, pymilvus's retries included (None: its own retries, no deadline)."""
    doc_field, meta_field = spec.doc_id_field, spec.metadata_field
    expr = f"{doc_field} in [{', '.join(quote_string(d) for d in doc_ids)}]"
    rows = client.query(collection_name, filter=expr, output_fields=[doc_field, meta_field], limit=QUERY_LIMIT,
                        timeout=timeout)
    if len(rows) < QUERY_LIMIT:
        count = Counter(row[doc_field] for row in rows)
    elif len(doc_ids) > 1:
        return {d: stored_hashes(client, collection_name, spec, [d], timeout)[d] for d in doc_ids}
    else:  # one document of more chunks than a query returns: count them server-side
        count = Counter({doc_ids[0]: client.query(collection_name, filter=expr, output_fields=["count(*)"],
                                                  timeout=timeout)[0]["count(*)"]})
    meta: Dict[str, Dict[str, Any]] = {}
    for row in rows:
        meta.setdefault(row[doc_field], row.get(meta_field) or {})
    out: Dict[str, Optional[str]] = {}
    for d in doc_ids:
        if d not in count:
            out[d] = None
        elif meta[d].get("chunk_count") != count[d]:
            out[d] = ""
        else:
            out[d] = meta[d].get("content_hash", "")
    return out


def stored_doc_ids(client: MilvusClient, collection_name: str, spec: CollectionSpec,
                   under: Optional[Path] = None) -> List[str]:
    """Document ids in the collection (those under folder ``under`` when given).

    The prefix test runs in Python: Milvus Lite 2.5.1 does not honour ``\\_`` escapes in prefix LIKE patterns.
    """
    ids = set()
    it = client.query_iterator(collection_name, batch_size=1000, filter=f'{spec.doc_id_field} != ""',
                               output_fields=[spec.doc_id_field])
    try:
        while True:
            batch = it.next()
            if not batch:
                break
            ids.update(r[spec.doc_id_field] for r in batch)
    finally:
        it.close()
    if under is not None:
        prefix = under.as_posix().rstrip("/") + "/"
        ids = {i for i in ids if i.startswith(prefix)}
    return sorted(ids)


def vanished(client: MilvusClient, collection_name: str, spec: CollectionSpec, files: Sequence[Path],
             folders: Sequence[Path]) -> List[str]:
    """Stored documents under ``folders`` whose file is neither among ``files`` nor on disk any more."""
    present = {f.as_posix() for f in files}
    gone: List[str] = []
    for folder in folders:
        gone += [d for d in stored_doc_ids(client, collection_name, spec, folder)
                 if d not in present and not Path(d).exists()]
    return gone
