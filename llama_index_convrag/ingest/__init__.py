"""Ingestion: files -> chunks -> embeddings -> Milvus.

``ingest`` (the function) is also exported at the top level as ``llama_index_convrag.ingest_files``: the name
``llama_index_convrag.ingest`` is this package. The collection layout names (``CollectionSpec``, ``default_spec``,
...) live in :mod:`llama_index_convrag.milvus.schema` and stay importable from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "ingest": "pipeline",
    "ingest_files": "pipeline:ingest",
    "Ingestor": "pipeline",
    "IngestReport": "pipeline",
    "CollectionSpec": "llama_index_convrag.milvus.schema",
    "VectorField": "llama_index_convrag.milvus.schema",
    "create_collection": "llama_index_convrag.milvus.schema",
    "default_spec": "llama_index_convrag.milvus.schema",
    "detect_spec": "llama_index_convrag.milvus.schema",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.ingest.pipeline import IngestReport, Ingestor, ingest
    from llama_index_convrag.milvus.schema import CollectionSpec, VectorField, create_collection, default_spec, detect_spec
