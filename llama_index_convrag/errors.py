"""Every error this package raises on purpose, under one base: ``except ConvRAGError`` catches them all.

Each class also subclasses the builtin that callers caught before the tree existed (``ValueError``,
``ConnectionError``, ``RuntimeError``), so existing ``except`` clauses keep working. Pure: no imports.
"""

from __future__ import annotations


class ConvRAGError(Exception):
    """Base of every error raised by ``llama_index_convrag``."""


class ConfigurationError(ConvRAGError, ValueError):
    """An argument or setting has a value we do not accept (the message names it and, where finite, the accepted
    ones): an unknown mode or provider, an empty URI, a missing key, a number out of range."""


class ArgumentTypeError(ConvRAGError, TypeError):
    """Arguments of the wrong kind or combination: an unknown keyword, a value of the wrong type, two options that
    exclude each other."""


class PathNotFoundError(ConvRAGError, FileNotFoundError):
    """A file or folder the caller named does not exist."""


class RecordNotFoundError(ConvRAGError, KeyError):
    """No stored record (message, turn) under the given id."""


class BudgetExceededError(ConvRAGError, ValueError):
    """The parts that are never trimmed (system prompt, question, extra variables) do not fit by themselves."""


class ScorerError(ConvRAGError, RuntimeError):
    """A scorer could not produce scores (bad reply, transport failure, missing model)."""


class RerankHTTPError(ScorerError):
    """The rerank server failed, timed out, or answered in a shape we cannot read."""


class ReaderError(ConvRAGError):
    """A file could not be turned into documents."""


class UnsupportedFileError(ReaderError):
    """No reader for the file's type, or its optional parser is not installed (the message says which)."""


class BinaryFileError(UnsupportedFileError):
    """A text-suffixed file whose bytes are not text (NUL bytes, or no encoding decodes them)."""


class FileParseError(ReaderError, ValueError):
    """A reader exists for the file but the file could not be parsed (the message names the file)."""


class ConversationStoreError(ConvRAGError, RuntimeError):
    """The store file or database cannot be used as-is (corrupted, foreign, or newer schema)."""


class MilvusConnectionError(ConvRAGError, ConnectionError):
    """Milvus could not be reached at the given URI."""


__all__ = [
    "ArgumentTypeError",
    "BinaryFileError",
    "BudgetExceededError",
    "ConfigurationError",
    "ConvRAGError",
    "ConversationStoreError",
    "FileParseError",
    "MilvusConnectionError",
    "PathNotFoundError",
    "ReaderError",
    "RecordNotFoundError",
    "RerankHTTPError",
    "ScorerError",
    "UnsupportedFileError",
]
