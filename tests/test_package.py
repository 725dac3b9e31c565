import importlib
import types

import pytest

import llama_index_convrag


@pytest.mark.parametrize("name", llama_index_convrag.__all__)
def test_every_public_name_resolves(name):
    value = getattr(llama_index_convrag, name)
    assert not isinstance(value, types.ModuleType), f"{name} resolves to a module"


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="'nope'"):
        llama_index_convrag.nope  # noqa: B018


def test_every_subpackage_has_an_init():
    for sub in ("chat", "embeddings", "evaluation", "indices", "ingest", "postprocessors", "prompts",
                "retrievers", "storage", "storage.conversation", "synthesizers", "testing"):
        assert importlib.import_module(f"llama_index_convrag.{sub}").__file__.endswith("__init__.py")
