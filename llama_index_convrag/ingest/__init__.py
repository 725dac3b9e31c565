"""Ingestion: files -> chunks -> embeddings -> Milvus.

The ``ingest`` function is exported at the top level as ``llama_index_convrag.ingest_files`` (the name
``llama_index_convrag.ingest`` is this package). The collection layout lives in :mod:`llama_index_convrag.milvus`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports

#: public name -> module of this package that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "ingest": "pipeline",
    "Ingestor": "pipeline",
    "IngestReport": "pipeline",
    "PipelineLimits": "limits",
    "ingest_distributed": "distributed",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.ingest.distributed import ingest_distributed
    from llama_index_convrag.ingest.limits import PipelineLimits
    from llama_index_convrag.ingest.pipeline import IngestReport, Ingestor, ingest
