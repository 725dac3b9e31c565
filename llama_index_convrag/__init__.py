"""llama-index-convrag: conversational RAG for LlamaIndex over Milvus.

The ``ingest`` function is exported here as ``ingest_files`` (``llama_index_convrag.ingest`` is the subpackage; its
``ingest`` function keeps working). Every error the package raises on purpose is a ``ConvRAGError``. Public names are imported lazily so that ``import llama_index_convrag`` (and ``convrag --help``) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict

__version__ = "0.1.0"

_EXPORTS: Dict[str, str] = {
    # chat
    "ConvRAGChatEngine": "llama_index_convrag.chat",
    "TrimReport": "llama_index_convrag.chat",
    "TurnRecord": "llama_index_convrag.chat",
    "message_fit_in": "llama_index_convrag.chat",
    "needs_rewrite": "llama_index_convrag.conversational",
    # index, ingestion, retrieval
    "ConvRAGIndex": "llama_index_convrag.indices",
    "IngestReport": "llama_index_convrag.ingest",
    "ingest_files": "llama_index_convrag.ingest",
    "MilvusHybridRetriever": "llama_index_convrag.retrievers",
    # synthesis
    "get_response_synthesizer": "llama_index_convrag.synthesizers",
    "ResponseMode": "llama_index_convrag.synthesizers",
    "register_mode": "llama_index_convrag.synthesizers",
    # postprocessors
    "ModelRerank": "llama_index_convrag.postprocessors",
    "MMRPostprocessor": "llama_index_convrag.postprocessors",
    "SimilarityThreshold": "llama_index_convrag.postprocessors",
    "BudgetedCoverageSelector": "llama_index_convrag.postprocessors",
    # storage, models, config
    "SQLiteConversationStore": "llama_index_convrag.storage.conversation",
    "LocalMiniLMEmbedding": "llama_index_convrag.embeddings",
    "MilvusTarget": "llama_index_convrag.milvus.client",
    "resolve_milvus": "llama_index_convrag.milvus.client",
    "resolve_llm": "llama_index_convrag.config",
    "resolve_embed_model": "llama_index_convrag.config",
    # errors (one tree under ConvRAGError)
    **{name: "llama_index_convrag.errors" for name in (
        "ConvRAGError", "ArgumentTypeError", "BinaryFileError", "BudgetExceededError", "ConfigurationError", "ConversationStoreError", "FileParseError",
        "MilvusConnectionError", "PathNotFoundError", "ReaderError", "RecordNotFoundError", "RerankHTTPError", "ScorerError", "UnsupportedFileError",
    )},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llama_index_convrag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(list(globals()) + __all__)


if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.chat import ConvRAGChatEngine, TrimReport, TurnRecord, message_fit_in
    from llama_index_convrag.conversational import needs_rewrite
    from llama_index_convrag.config import resolve_embed_model, resolve_llm
    from llama_index_convrag.embeddings import LocalMiniLMEmbedding
    from llama_index_convrag.errors import (
        ArgumentTypeError,
        BinaryFileError,
        BudgetExceededError,
        ConfigurationError,
        ConversationStoreError,
        ConvRAGError,
        FileParseError,
        MilvusConnectionError,
        PathNotFoundError,
        ReaderError,
        RecordNotFoundError,
        RerankHTTPError,
        ScorerError,
        UnsupportedFileError,
    )
    from llama_index_convrag.indices import ConvRAGIndex
    from llama_index_convrag.ingest import IngestReport, ingest_files
    from llama_index_convrag.milvus.client import MilvusTarget, resolve_milvus
    from llama_index_convrag.postprocessors import (
        BudgetedCoverageSelector,
        MMRPostprocessor,
        ModelRerank,
        SimilarityThreshold,
    )
    from llama_index_convrag.retrievers import MilvusHybridRetriever
    from llama_index_convrag.storage.conversation import SQLiteConversationStore
    from llama_index_convrag.synthesizers import ResponseMode, get_response_synthesizer, register_mode
