"""llama-index-convrag: conversational RAG for LlamaIndex over Milvus.

The names a user types; everything else lives in one subpackage and is imported from there. ``ingest_files`` is
:func:`llama_index_convrag.ingest.ingest` (the name ``ingest`` here is the subpackage). Every error the package
raises on purpose is a ``ConvRAGError``. Names are imported lazily, so ``import llama_index_convrag`` (and
``convrag --help``) stays fast.

Importing the package registers the ``pkg_resources`` stand-in milvus-lite 2.5.1 needs where setuptools provides none
(:mod:`llama_index_convrag.milvus.pkg_resources_shim`; standard library only, pymilvus is not loaded), so a
``MilvusClient("x.db")`` the user opens afterwards works too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

from llama_index_convrag._lazy import lazy_exports
from llama_index_convrag.milvus.pkg_resources_shim import ensure_pkg_resources

ensure_pkg_resources()

__version__ = "0.1.0"

_ERRORS = (
    "ConvRAGError", "ArgumentTypeError", "BinaryFileError", "BudgetExceededError", "ConfigurationError",
    "ConversationStoreError", "FileParseError", "MilvusConnectionError", "PathNotFoundError", "ReaderError",
    "RecordNotFoundError", "RerankHTTPError", "ScorerError", "UnsupportedFileError",
)

#: public name -> module that defines it (imported on first access)
_EXPORTS: Dict[str, str] = {
    "ConvRAGIndex": "llama_index_convrag.indices",
    "ConvRAGChatEngine": "llama_index_convrag.chat",
    "RewriteOptions": "llama_index_convrag.chat",
    "AnswerOptions": "llama_index_convrag.chat",
    "BudgetOptions": "llama_index_convrag.chat",
    "MilvusHybridRetriever": "llama_index_convrag.retrievers",
    "ingest_files": "llama_index_convrag.ingest.pipeline:ingest",
    "IngestReport": "llama_index_convrag.ingest",
    "get_response_synthesizer": "llama_index_convrag.synthesizers",
    "ResponseMode": "llama_index_convrag.synthesizers",
    "ModelRerank": "llama_index_convrag.postprocessors",
    "MMRPostprocessor": "llama_index_convrag.postprocessors",
    "SimilarityThreshold": "llama_index_convrag.postprocessors",
    "BudgetedCoverageSelector": "llama_index_convrag.postprocessors",
    "SQLiteConversationStore": "llama_index_convrag.storage.conversation",
    "LocalMiniLMEmbedding": "llama_index_convrag.embeddings",
    "MilvusTarget": "llama_index_convrag.milvus",
    "resolve_llm": "llama_index_convrag.config",
    **{name: "llama_index_convrag.errors" for name in _ERRORS},
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from llama_index_convrag.chat import ConvRAGChatEngine
    from llama_index_convrag.config import resolve_llm
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
    from llama_index_convrag.ingest import IngestReport
    from llama_index_convrag.ingest import ingest as ingest_files
    from llama_index_convrag.milvus import MilvusTarget
    from llama_index_convrag.postprocessors import (
        BudgetedCoverageSelector,
        MMRPostprocessor,
        ModelRerank,
        SimilarityThreshold,
    )
    from llama_index_convrag.retrievers import MilvusHybridRetriever
    from llama_index_convrag.storage.conversation import SQLiteConversationStore
    from llama_index_convrag.synthesizers import ResponseMode, get_response_synthesizer
