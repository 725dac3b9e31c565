"""One file -> its chunks, or why it has none: the per-file step every ingest engine shares.

:func:`prepare_file` hashes the file, compares the hash with the stored one, and reads and splits only a changed or
new file. It is a plain function of picklable values, so it runs the same in this process, in a worker process of
:mod:`~llama_index_convrag.ingest.read_stage` and in a Ray worker (:mod:`~llama_index_convrag.ingest.distributed`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_convrag._files import sha256_file
from llama_index_convrag.ingest.readers import UnsupportedFile, read_file
from llama_index_convrag.milvus.schema import HIDDEN_METADATA_KEYS, CollectionSpec, llamaindex_fields

#: What became of a file: its chunks are to be stored (``added`` / ``updated``), or it was skipped.
OUTCOMES = ("added", "updated", "unchanged", "unsupported", "failed")


@dataclass
class Chunk:
    """One chunk ready to embed and store: its text (embedded and stored as is, without metadata), its row in our
    layout without vectors, and its node when it was made in this process (extra dense fields read it)."""

    doc_id: str
    text: str
    row: Dict[str, Any]
    node: Optional[BaseNode] = None


@dataclass
class PreparedFile:
    """The outcome of one file: ``outcome`` is one of :data:`OUTCOMES`; ``reason`` says why a file was skipped."""

    doc_id: str
    outcome: str
    size: int = 0
    content_hash: str = ""
    chunks: List[Chunk] = field(default_factory=list)
    reason: str = ""


def base_row(spec: CollectionSpec, node: BaseNode, text: str) -> Dict[str, Any]:
    """A chunk's row in our layout without its vectors: primary key, document id, text, metadata, LlamaIndex's
    node fields."""
    return {spec.primary_field: node.node_id, spec.doc_id_field: node.ref_doc_id, spec.text_field: text,
            spec.metadata_field: dict(node.metadata), **llamaindex_fields(node)}


def to_chunks(spec: CollectionSpec, nodes: List[BaseNode], keep_nodes: bool) -> List[Chunk]:
    out = []
    for n in nodes:
        text = n.get_content(metadata_mode=MetadataMode.NONE)
        out.append(Chunk(str(n.ref_doc_id), text, base_row(spec, n, text), n if keep_nodes else None))
    return out


def file_hash(path: Path) -> str:
    return sha256_file(path)


def chunk_id(doc_id: str, content_hash: str, index: int) -> str:
    return hashlib.sha1(f"{doc_id}\0{content_hash}\0{index}".encode("utf-8")).hexdigest()


def file_chunks(path: Path, doc_id: str, content_hash: str, splitter: NodeParser) -> List[BaseNode]:
    """The chunks of ``path``: ids from :func:`chunk_id` (also in their previous / next links, so a file's rows are
    the same on every run), ``chunk`` / ``chunk_count`` and the file's metadata."""
    docs = read_file(path)
    if not any(d.text.strip() for d in docs):
        raise UnsupportedFile("empty file: no text to index")
    stat = path.stat()
    for d in docs:
        d.metadata.update({"file_path": doc_id, "file_name": path.name, "content_hash": content_hash,
                           "last_modified": int(stat.st_mtime)})
        d.id_ = doc_id
        # chunks are embedded without metadata (MetadataMode.NONE): the splitter must not count it, or a long
        # path fails a small --chunk-size ("Metadata length (140) is longer than chunk size (128)")
        d.excluded_llm_metadata_keys = list(d.metadata)
        d.excluded_embed_metadata_keys = list(d.metadata)
    nodes = splitter.get_nodes_from_documents(docs)
    new_ids = {n.node_id: chunk_id(doc_id, content_hash, i) for i, n in enumerate(nodes)}
    for i, n in enumerate(nodes):
        n.excluded_llm_metadata_keys = list(HIDDEN_METADATA_KEYS)
        n.excluded_embed_metadata_keys = list(HIDDEN_METADATA_KEYS)
        n.id_ = new_ids[n.node_id]
        n.metadata["chunk"] = i
        n.metadata["chunk_count"] = len(nodes)
        for related in n.relationships.values():  # previous / next chunk: the splitter's random ids -> ours
            if not isinstance(related, list) and related.node_id in new_ids:
                related.node_id = new_ids[related.node_id]
    return nodes


def prepare_file(path: Path, stored_hash: Optional[str], splitter: NodeParser, spec: CollectionSpec, *,
                 keep_nodes: bool = True) -> PreparedFile:
    """Hash ``path``; skip it when ``stored_hash`` equals the hash, else read and split it into :class:`Chunk`s
    (``keep_nodes=False``: without their nodes, which are costly to send to another process).

    ``stored_hash`` is ``None`` for a file not stored yet (``added``) and ``""`` for one stored incompletely (it is
    redone, ``updated``). A file without a reader is ``unsupported``; one the parser or the file system failed on
    is ``failed``; both carry the reason.
    """
    doc_id, size = path.as_posix(), 0
    try:
        size = path.stat().st_size
        digest = file_hash(path)
        if stored_hash == digest:
            return PreparedFile(doc_id, "unchanged", size=size, content_hash=digest)
        nodes = file_chunks(path, doc_id, digest, splitter)
    except UnsupportedFile as exc:
        return PreparedFile(doc_id, "unsupported", size=size, reason=str(exc))
    except (OSError, ValueError) as exc:
        return PreparedFile(doc_id, "failed", size=size, reason=f"{type(exc).__name__}: {exc}")
    return PreparedFile(doc_id, "added" if stored_hash is None else "updated", size=size, content_hash=digest,
                        chunks=to_chunks(spec, nodes, keep_nodes))
