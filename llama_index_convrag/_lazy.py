"""Lazy package exports: a package names its public attributes and where they live; the module holding one is
imported on first access, so importing a package (or one pure module inside it) never loads heavy dependencies."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Mapping, Tuple


def lazy_exports(package: str, exports: Mapping[str, str]) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """``(__getattr__, __dir__)`` for ``package``; ``exports`` maps a public name to ``"module"`` (the attribute of
    the same name in ``package.module``) or ``"module:attr"`` (another attribute name)."""
    table: Dict[str, Tuple[str, str]] = {}
    for name, where in exports.items():
        module, _, attr = where.partition(":")
        table[name] = (module if module.startswith("llama_index_convrag") else f"{package}.{module}",
                       attr if attr else name)

    def __getattr__(name: str) -> Any:
        found = table.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(found[0]), found[1])

    def __dir__() -> List[str]:
        return sorted(set(importlib.import_module(package).__dict__) | set(table))

    return __getattr__, __dir__
