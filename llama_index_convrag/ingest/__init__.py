"""Ingestion: files -> chunks -> embeddings -> Milvus."""

from llama_index_convrag.ingest.pipeline import IngestReport, Ingestor, ingest
from llama_index_convrag.ingest.schema import CollectionSpec, VectorField, create_collection, default_spec, detect_spec

__all__ = ["CollectionSpec", "IngestReport", "Ingestor", "VectorField", "create_collection", "default_spec",
           "detect_spec", "ingest"]
