"""Re-fetch LlamaIndex core's test files that ``tests/conformance`` ports, apply our edits, and diff or write them.

    python scripts/refresh_conformance.py --source ~/src/llama_index            # diff against a local checkout
    python scripts/refresh_conformance.py --ref 7a7d1c1b...                     # diff against GitHub at a commit
    python scripts/refresh_conformance.py --source ~/src/llama_index --write    # rewrite tests/conformance files
    python scripts/refresh_conformance.py --source DIR --write --out /tmp/port  # port into another folder

``--source`` reads a clone of run-llama/llama_index and records, per file, the last commit that touched it
(``git log -1``); ``--ref`` downloads ``raw.githubusercontent.com/run-llama/llama_index/REF/PATH`` (needs the network;
pass a commit, not a branch, so the provenance line is exact). The edits are the ones the conformance READMEs list:
the names we provide are imported from us (and, for chat engines, ``from_defaults`` gains our ``chat_mode``); every
ported file starts with a provenance line naming the upstream path and commit. xfail markers live in the folders'
``conftest.py`` files and are not touched. Not run in CI (it needs the upstream source).
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE = ROOT / "tests" / "conformance"
UPSTREAM = "llama-index-core/tests"
RAW = "https://raw.githubusercontent.com/run-llama/llama_index/{ref}/{path}"

#: what ``llama_index_convrag.synthesizers`` provides under core's names
SYNTH_NAMES = ("Refine", "CompactAndRefine", "Accumulate", "CompactAndAccumulate", "SimpleSummarize",
               "TreeSummarize", "Generation", "NoText", "BaseSynthesizer", "get_response_synthesizer", "ResponseMode",
               "StructuredRefineResponse")
SYNTH_IMPORT = re.compile(r"from llama_index\.core\.response_synthesizers(?:\.\w+)? import (\([^)]*\)|[^\n]+)")


def swap_synthesizer_imports(text: str) -> str:
    """Names we provide come from ``llama_index_convrag.synthesizers``; the others stay imported from core."""
    def one(m: "re.Match[str]") -> str:
        names = [n.strip() for n in m.group(1).strip("()").replace("\n", " ").split(",") if n.strip()]
        ours = [n for n in names if n.split(" as ")[0] in SYNTH_NAMES]
        core = [n for n in names if n.split(" as ")[0] not in SYNTH_NAMES]
        lines = [f"{m.group(0).split(' import ')[0]} import {', '.join(core)}"] if core else []
        if ours:
            lines.append(f"from llama_index_convrag.synthesizers import {', '.join(ours)}")
        return "\n".join(lines)
    return SYNTH_IMPORT.sub(one, text)


def engine_as(core_class: str, module: str, chat_mode: Optional[str]) -> Callable[[str], str]:
    """Core's chat engine ``core_class`` becomes ours; ``chat_mode`` is added to ``from_defaults(...)`` calls."""
    def edit(text: str) -> str:
        text = re.sub(rf"from llama_index\.core\.chat_engine(?:\.{module})? import (?:\(\s*{core_class},?\s*\)|{core_class}\b)",
                      "from llama_index_convrag.chat import ConvRAGChatEngine"
                      + ("" if chat_mode else f" as {core_class}"), text)
        if chat_mode is None:
            return text
        return add_keyword(text.replace(core_class, "ConvRAGChatEngine"), "ConvRAGChatEngine.from_defaults(",
                           f"chat_mode={chat_mode!r}")
    return edit


def add_keyword(text: str, call: str, keyword: str) -> str:
    """``keyword`` appended to every ``call...)`` (matched by bracket depth), before its closing parenthesis."""
    out, start = [], 0
    while (i := text.find(call, start)) >= 0:
        depth, j = 1, i + len(call)
        while depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        args = text[i + len(call): j - 1]
        body = args.rstrip()
        tail = args[len(body):]
        sep = "" if body.endswith(",") or not body.strip() else ","
        out.append(text[start: i + len(call)] + body + f"{sep} {keyword}" + tail + ")")
        start = j
    return "".join(out) + text[start:]


#: local file (under tests/conformance) -> (upstream file under llama-index-core/tests, edit)
FILES: Dict[str, Tuple[str, Callable[[str], str]]] = {
    **{f"response_synthesizers/{n}": (f"response_synthesizers/{n}", swap_synthesizer_imports) for n in (
        "test_accumulate.py", "test_base.py", "test_compact_and_accumulate.py", "test_compact_and_refine.py",
        "test_factory.py", "test_factory_prompt_helper.py", "test_generate.py", "test_no_text.py",
        "test_refine.py", "test_simple_summarize.py", "test_tree_summarize.py")},
    "chat_engine/test_condense_question.py": ("chat_engine/test_condense_question.py",
                                              engine_as("CondenseQuestionChatEngine", "condense_question", None)),
    "chat_engine/test_condense_plus_context.py": ("chat_engine/test_condense_plus_context.py",
                                                  engine_as("CondensePlusContextChatEngine",
                                                            "condense_plus_context", "condense_plus_context")),
    "chat_engine/test_context.py": ("chat_engine/test_context.py", engine_as("ContextChatEngine", "context",
                                                                             "context")),
}
PROVENANCE = "# Ported from run-llama/llama_index {path} at {commit} (MIT, see README.md); edits: {edits}.\n"
EDITS = {"response_synthesizers": "our synthesizer imports", "chat_engine": "our engine import (and chat_mode)"}


def fetch(upstream: str, source: Optional[Path], ref: Optional[str]) -> Tuple[str, str]:
    """``(text, commit)`` of ``llama-index-core/tests/<upstream>``."""
    path = f"{UPSTREAM}/{upstream}"
    if source is not None:
        commit = subprocess.run(["git", "-C", str(source), "log", "-1", "--format=%H", "--", path],
                                capture_output=True, text=True, check=True).stdout.strip()
        return (source / path).read_text(), commit
    assert ref is not None
    with urllib.request.urlopen(RAW.format(ref=ref, path=path), timeout=30) as r:  # noqa: S310 - fixed host
        return r.read().decode(), ref


def port(local: str, text: str, commit: str) -> str:
    upstream, edit = FILES[local]
    header = PROVENANCE.format(path=f"{UPSTREAM}/{upstream}", commit=commit, edits=EDITS[local.split("/")[0]])
    return header + edit(text)


def without_provenance(text: str) -> List[str]:
    return [line for line in text.splitlines(keepends=True) if not line.startswith("# Ported from")]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--source", type=Path, help="a clone of run-llama/llama_index")
    where.add_argument("--ref", help="a run-llama/llama_index commit to download (needs the network)")
    p.add_argument("--write", action="store_true", help="write the ported files instead of printing diffs")
    p.add_argument("--out", type=Path, default=CONFORMANCE, help="folder to write into (default tests/conformance)")
    p.add_argument("files", nargs="*", help=f"local files to refresh (default all: {sorted(FILES)})")
    args = p.parse_args(argv)
    changed = 0
    for local in args.files or sorted(FILES):
        if local not in FILES:
            p.error(f"unknown file {local!r}; known: {sorted(FILES)}")
        text, commit = fetch(FILES[local][0], args.source, args.ref)
        ported = port(local, text, commit)
        target = args.out / local
        if args.write:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(ported)
            print(f"wrote {target} ({commit})")
            continue
        old = target.read_text() if target.exists() else ""
        diff = list(difflib.unified_diff(without_provenance(old), without_provenance(ported), f"a/{local}",
                                         f"b/{local} @ {commit}"))
        changed += bool(diff)
        sys.stdout.writelines(diff)
    if not args.write:
        print(f"{changed} of {len(args.files or FILES)} files differ from upstream", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
