"""Only our own code and prose: no file of the repository carries another project's provenance markers (copyright
lines, "copied from" notes, licence texts, upstream commit hashes) or repeats a long run of lines of the installed
LlamaIndex core's sources.

The run check compares *significant* lines (whitespace folded; imports, parameter declarations and short or
punctuation-only lines skipped, since a drop-in must share core's names and signatures) and flags
:data:`RUN_LINES` consecutive ones that also occur, in the same order, in a core module.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Dict, Iterator, List, Sequence, Tuple

import llama_index.core
import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN_LINES = 6
"""Consecutive significant lines shared with a core module that make a copy (core's ``_update_prompts`` idiom of
four ``if key in prompts`` pairs is about this long)."""
DATA_SUFFIXES = (".json", ".onnx", ".png", ".jpg", ".gif", ".ico", ".woff", ".woff2", ".db", ".gz", ".zip")
"""Data, not code or prose (the tokenizer vocabulary's attribution is in ``embeddings/NOTICE``)."""
SKIPPED_DIRS = {".git", ".venv", "__pycache__", "node_modules", "build", "dist", ".hypothesis"}
OUR_LICENSE = "LICENSE"
OUR_COPYRIGHT = "the llama-index-convrag authors"

MARKERS = {
    "copyright line": re.compile(r"copyright\s*(\(c\)|©|\d{4})", re.I),
    "copied-from note": re.compile(r"\b(copied|ported|vendored|adapted)\s+(verbatim\s+)?from\b", re.I),
    "licence text": re.compile("|".join([
        "permission is hereby " + "granted", "licensed under the (apache|mit|bsd)", "spdx-" + "license-identifier",
        r"the software is provided \"as is\"", "redistribution and use in source and binary forms"]), re.I),
}
COMMIT = re.compile(r"\b[0-9a-f]{40}\b")
UPSTREAM = re.compile(r"commit|upstream|run-llama|llama_index|github\.com", re.I)
IMPORT = re.compile(r"^(from\s+\S+\s+import\b|import\s+\S)")
PARAMETER = re.compile(r"^\*{0,2}\w+(\s*:\s*[^=]+?)?(\s*=\s*.+?)?,?$")


def repository_files() -> List[Path]:
    """The files git tracks (a checkout), else every file under the root outside build and cache folders."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60)
        return [ROOT / name for name in out.stdout.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        return [p for p in ROOT.rglob("*") if p.is_file() and not SKIPPED_DIRS & set(p.relative_to(ROOT).parts)]


def text_files() -> Iterator[Tuple[str, List[str]]]:
    for path in repository_files():
        if path.suffix in DATA_SUFFIXES or not path.is_file() or path == Path(__file__):
            continue
        try:
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue


def marker_hits(name: str, lines: Sequence[str]) -> List[str]:
    hits = []
    for number, line in enumerate(lines, start=1):
        for kind, pattern in MARKERS.items():
            if pattern.search(line) and not (name == OUR_LICENSE and (kind == "licence text" or OUR_COPYRIGHT in line)):
                hits.append(f"{name}:{number}: {kind}: {line.strip()[:100]}")
        if COMMIT.search(line) and UPSTREAM.search(line):
            hits.append(f"{name}:{number}: upstream commit: {line.strip()[:100]}")
    return hits


def significant(lines: Sequence[str]) -> List[Tuple[int, str]]:
    """``(line number, folded text)`` of the lines that can make a copy (see the module docstring)."""
    out: List[Tuple[int, str]] = []
    in_import = False
    for number, line in enumerate(lines, start=1):
        text = " ".join(line.split())
        if in_import:
            in_import = ")" not in text
            continue
        if IMPORT.match(text):
            in_import = text.endswith("(")
            continue
        if len(text) < 12 or PARAMETER.match(text) or len(re.findall(r"\w", text)) < 8:
            continue
        out.append((number, text))
    return out


def runs(lines: Sequence[str]) -> Iterator[Tuple[int, int]]:
    """``(first line number, hash)`` of every run of :data:`RUN_LINES` significant lines."""
    kept = significant(lines)
    for i in range(len(kept) - RUN_LINES + 1):
        yield kept[i][0], hash(tuple(text for _, text in kept[i:i + RUN_LINES]))


@pytest.fixture(scope="module")
def core_runs() -> Dict[int, str]:
    """Every run of the installed llama-index-core's modules -> where it is."""
    root = Path(llama_index.core.__file__).parent
    found: Dict[int, str] = {}
    for path in root.rglob("*.py"):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        for number, key in runs(lines):
            found.setdefault(key, f"llama_index/core/{path.relative_to(root)}:{number}")
    return found


def test_no_file_carries_another_projects_provenance_markers():
    hits = [hit for name, lines in text_files() for hit in marker_hits(name, lines)]
    assert hits == []


def test_no_file_repeats_a_run_of_cores_sources(core_runs):
    assert len(core_runs) > 10_000  # core's sources were read
    hits = [f"{name}:{number} = {core_runs[key]}" for name, lines in text_files() for number, key in runs(lines)
            if key in core_runs]
    assert hits == []


def test_the_checks_see_a_copy(core_runs):
    core_module = Path(llama_index.core.__file__).parent / "response_synthesizers" / "refine.py"
    pasted = ["# ours", *core_module.read_text(encoding="utf-8").splitlines()[200:260], "# ours again"]
    assert any(key in core_runs for _, key in runs(pasted))
    assert marker_hits("x.py", ["# Copied from run-llama/llama_index at " + "0" * 40]) == [
        "x.py:1: copied-from note: # Copied from run-llama/llama_index at " + "0" * 40,
        "x.py:1: upstream commit: # Copied from run-llama/llama_index at " + "0" * 40]
    assert marker_hits("y.md", ["Copyright (c) Jerry Liu"]) == ["y.md:1: copyright line: Copyright (c) Jerry Liu"]
    assert marker_hits(OUR_LICENSE, [f"Copyright (c) 2026 {OUR_COPYRIGHT}"]) == []
