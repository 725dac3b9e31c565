import importlib
import pkgutil
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


def public_places() -> dict:
    """name -> the packages (and ``errors``) whose ``__all__`` lists it; the top level is left out."""
    places: dict = {}
    modules = [m.name for m in pkgutil.walk_packages(llama_index_convrag.__path__, "llama_index_convrag.") if m.ispkg]
    for name in [*modules, "llama_index_convrag.errors"]:
        module = importlib.import_module(name)
        assert hasattr(module, "__all__"), f"{name} has no explicit __all__"
        for public in module.__all__:
            places.setdefault(public, []).append(name)
    return places


def test_each_name_is_exported_from_one_public_place():
    doubles = {name: where for name, where in public_places().items() if len(where) > 1}
    assert doubles == {}


def test_every_top_level_name_comes_from_the_one_place_that_exports_it():
    places = public_places()
    for name, where in llama_index_convrag._EXPORTS.items():
        module, _, attr = where.partition(":")
        attr = attr if attr else name
        assert getattr(llama_index_convrag, name) is getattr(importlib.import_module(module), attr)
        home = places.get(attr, [module])
        assert len(home) == 1 and (module == home[0] or module.startswith(home[0] + ".")), (name, where, home)
