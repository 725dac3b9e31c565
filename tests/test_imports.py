"""The import structure: floors (no import runs back up), no function-level imports of our own modules outside the
CLI, and pure modules that do not load pymilvus or the OpenAI client."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

PACKAGE = "llama_index_convrag"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: A module may import from its own unit and from units on LOWER floors only (never the same floor, never higher).
FLOORS: Tuple[Tuple[str, ...], ...] = (
    ("errors",),  # the error tree: imports nothing, every unit may raise from it
    ("_beside", "_env", "_files", "_lazy", "_limits", "_scope", "prompts", "text", "rank_trail",
     "instrumentation"),  # pure: only errors
    ("milvus", "embeddings"),  # adapters to the outside: Milvus, ONNX
    ("config", "ingest", "retrievers", "storage"),  # model resolution, writing, reading, conversation stores
    ("testing",),  # test doubles (scripted LLM, OpenAI-compatible server) and the real-LLM tier's setup
    ("postprocessors", "synthesizers"),  # what happens to retrieved nodes
    ("judge",),  # judge-guided recursive retrieval (grades chunks, recurses, wraps a synthesizer)
    ("conversational", "memory"),  # follow-ups (rewrite, the query carrying the plan, fusion); long-conversation memory
    ("chat",),  # the chat engine (uses the conversational wing, retrievers, stores, synthesizers)
    ("indices",),  # the index hands out retrievers, query engines and chat engines
    ("evaluation",),
    ("serve",),  # the HTTP service (FastAPI): create_app over built engine parts
    ("cli_commands",),  # one module per CLI command group
    ("cli", "__init__"),  # entry points: argparse and exit codes, and the lazy top-level exports
)
FLOOR_OF: Dict[str, int] = {unit: level for level, units in enumerate(FLOORS) for unit in units}

#: Function-level imports of our own modules that are allowed: the CLI keeps ``convrag --help`` fast by importing a
#: command's modules only when it runs.
LAZY_ALLOWED_UNITS = frozenset({"cli", "cli_commands"})


def modules() -> Iterator[Tuple[str, Path]]:
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def unit_of(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def own_imports(tree: ast.AST) -> Iterator[Tuple[ast.ImportFrom, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            yield node, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield node, alias.name  # type: ignore[misc]


def function_level(tree: ast.AST) -> List[ast.AST]:
    """Import nodes inside a function body."""
    found: List[ast.AST] = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.extend(n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return found


def test_every_unit_has_a_floor():
    units = {unit_of(name) for name, _ in modules()}
    assert sorted(units - set(FLOOR_OF)) == []


def test_no_import_runs_back_up_the_floors():
    violations = []
    for name, path in modules():
        unit = unit_of(name)
        for node, target in own_imports(ast.parse(path.read_text())):
            other = unit_of(target)
            if other != unit and FLOOR_OF[other] >= FLOOR_OF[unit]:
                violations.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} {unit} (floor {FLOOR_OF[unit]}) "
                                  f"imports {target} (floor {FLOOR_OF[other]})")
    assert violations == []


def test_no_function_level_imports_of_our_modules_outside_the_cli():
    found = []
    for name, path in modules():
        if unit_of(name) in LAZY_ALLOWED_UNITS:
            continue
        tree = ast.parse(path.read_text())
        lazy = {id(n) for n in function_level(tree)}
        for node, target in own_imports(tree):
            if id(node) in lazy:
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} imports {target} inside a function")
    assert found == []


def test_the_checks_catch_a_violation():
    tree = ast.parse("def f():\n    from llama_index_convrag.chat import engine\n")
    [(node, target)] = list(own_imports(tree))
    assert target == "llama_index_convrag.chat" and function_level(tree) == [node]
    assert FLOOR_OF[unit_of("llama_index_convrag.chat.engine")] > FLOOR_OF[unit_of("llama_index_convrag.milvus")]


HEAVY = ("pymilvus", "openai", "onnxruntime")


def loaded_after_import(module: str) -> List[str]:
    code = (f"import json, sys; import {module}; "
            f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT.parent, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", [
    "llama_index_convrag.conversational.triggers",
    "llama_index_convrag.retrievers.fusion",
    "llama_index_convrag.milvus.filters",
    "llama_index_convrag.milvus.lite_lock",  # the lock tests' child processes import only it
    "llama_index_convrag.errors",
    "llama_index_convrag",
])
def test_pure_modules_do_not_load_heavy_clients(module):
    assert loaded_after_import(module) == []


def test_the_subprocess_check_sees_a_heavy_import():
    assert "pymilvus" in loaded_after_import("llama_index_convrag.milvus.client")
