"""One error tree: every error is a ConvRAGError, keeps the builtin base callers caught before, and is importable
from its old path and from the top level."""

from __future__ import annotations

import pytest

import llama_index_convrag
from llama_index_convrag import errors
from llama_index_convrag.chat.budget import BudgetExceededError as BudgetFromChat
from llama_index_convrag.config import resolve_embed_model
from llama_index_convrag.ingest.readers import UnsupportedFile
from llama_index_convrag.milvus.client import MilvusConnectionError as MilvusFromClient
from llama_index_convrag.milvus.client import resolve_milvus
from llama_index_convrag.postprocessors import RerankHTTPError as HTTPFromPostprocessors
from llama_index_convrag.postprocessors import ScorerError as ScorerFromPostprocessors
from llama_index_convrag.storage import MilvusConnectionError as MilvusFromStorage
from llama_index_convrag.storage.conversation import ConversationStoreError as StoreFromStorage

#: error -> the builtin it subclassed before the tree (``except`` clauses in user code rely on it)
OLD_BASES = {
    errors.BudgetExceededError: ValueError,
    errors.ScorerError: RuntimeError,
    errors.RerankHTTPError: RuntimeError,
    errors.ConversationStoreError: RuntimeError,
    errors.MilvusConnectionError: ConnectionError,
    errors.ConfigurationError: ValueError,
    errors.FileParseError: ValueError,
    errors.UnsupportedFileError: Exception,
    errors.BinaryFileError: errors.UnsupportedFileError,
    errors.ReaderError: Exception,
}


@pytest.mark.parametrize("cls", sorted(OLD_BASES, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_each_error_is_a_convrag_error_and_keeps_its_old_base(cls):
    err = cls("boom")
    assert isinstance(err, errors.ConvRAGError)
    assert isinstance(err, OLD_BASES[cls])
    assert str(err) == "boom"


def test_the_tree_is_complete_and_exported_from_the_top_level():
    assert set(errors.__all__) == {c.__name__ for c in OLD_BASES} | {"ConvRAGError"}
    for name in errors.__all__:
        assert getattr(llama_index_convrag, name) is getattr(errors, name)
        assert name in llama_index_convrag.__all__


def test_rerank_http_error_is_a_scorer_error_and_readers_errors_are_reader_errors():
    assert issubclass(errors.RerankHTTPError, errors.ScorerError)
    assert issubclass(errors.UnsupportedFileError, errors.ReaderError)
    assert issubclass(errors.FileParseError, errors.ReaderError)


def test_old_import_paths_give_the_same_classes():
    assert BudgetFromChat is errors.BudgetExceededError
    assert ScorerFromPostprocessors is errors.ScorerError
    assert HTTPFromPostprocessors is errors.RerankHTTPError
    assert StoreFromStorage is errors.ConversationStoreError
    assert MilvusFromClient is MilvusFromStorage is errors.MilvusConnectionError
    assert UnsupportedFile is errors.UnsupportedFileError


def test_configuration_errors_are_raised_as_such():
    with pytest.raises(errors.ConfigurationError, match=r"one of \['local', 'openai'\], got 'cohere'"):
        resolve_embed_model(spec="cohere", env={})
    with pytest.raises(errors.ConfigurationError, match="Milvus URI '  ' is empty; accepted: "):
        resolve_milvus("  ", env={})
