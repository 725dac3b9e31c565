"""One error tree: every error is a ConvRAGError, keeps the builtin base callers caught before, and is importable
from the module that raises it and from the top level."""

from __future__ import annotations

from pathlib import Path

import pytest

import llama_index_convrag
from llama_index_convrag import errors
from llama_index_convrag.chat.budget import BudgetExceededError as BudgetFromChat
from llama_index_convrag.conversational.rewrite import QuestionRewriter
from llama_index_convrag.ingest.pipeline import collect_files
from llama_index_convrag.config import resolve_embed_model
from llama_index_convrag.ingest.readers import UnsupportedFile
from llama_index_convrag.milvus.client import MilvusConnectionError as MilvusFromClient
from llama_index_convrag.milvus.client import resolve_milvus

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
    errors.ArgumentTypeError: TypeError,
    errors.PathNotFoundError: FileNotFoundError,
    errors.RecordNotFoundError: KeyError,
}


@pytest.mark.parametrize("cls", sorted(OLD_BASES, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_each_error_is_a_convrag_error_and_keeps_its_old_base(cls):
    err = cls("boom")
    assert isinstance(err, errors.ConvRAGError)
    assert isinstance(err, OLD_BASES[cls])
    assert str(err) == ("'boom'" if issubclass(cls, KeyError) else "boom")


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
    assert MilvusFromClient is errors.MilvusConnectionError
    assert UnsupportedFile is errors.UnsupportedFileError


def test_configuration_errors_are_raised_as_such():
    with pytest.raises(errors.ConfigurationError, match=r"one of \['local', 'openai'\], got 'cohere'"):
        resolve_embed_model(spec="cohere", env={})
    with pytest.raises(errors.ConfigurationError, match="Milvus URI '  ' is empty; accepted: "):
        resolve_milvus("  ", env={})


#: builtins the package must not raise directly: each has its subclass in the tree
RAISED_AS = {"ValueError": "ConfigurationError", "TypeError": "ArgumentTypeError",
             "FileNotFoundError": "PathNotFoundError", "KeyError": "RecordNotFoundError"}


def test_the_package_raises_tree_errors_not_bare_builtins():
    root = Path(llama_index_convrag.__file__).parent
    found = [f"{path.relative_to(root)}:{n}: raise {builtin}(... (use {tree})"
             for path in sorted(root.rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for builtin, tree in RAISED_AS.items() if f"raise {builtin}(" in line]
    assert found == []


def test_argument_checks_are_configuration_and_argument_type_errors(tmp_path):
    with pytest.raises(errors.ConfigurationError, match=r"rewrite strategy must be one of \['llm', 'contextual'"):
        QuestionRewriter(strategy="t5")
    with pytest.raises(errors.ArgumentTypeError, match=r"unknown ingest option\(s\) \['chunk_sise'\]"):
        llama_index_convrag.ingest_files([tmp_path], collection_name="c", embed_model=None, chunk_sise=5)
    with pytest.raises(errors.PathNotFoundError, match="no such file or folder"):
        collect_files([tmp_path / "absent"])
