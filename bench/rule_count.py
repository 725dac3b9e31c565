"""Count the hand-written text rules of the answer path and the LLM-free rewrite: regular expressions, named
constants, words of hand-kept lists, and the fields of typed rules objects (each with its reason).

Read with ``ast`` (nothing is imported), over the modules that hold the text rules (:data:`MODULES`; a path that does
not exist in the tree counted is skipped, a folder counts every module in it):

* **regular expressions**: each call of ``re`` / ``regex`` (``compile``, ``search``, ``match``, ``fullmatch``,
  ``sub``, ``split``, ``findall``, ``finditer``) whose pattern is written in the code (a string, an f-string or a
  concatenation of them);
* **named constants**: module-level names in capitals (``SHORT_WORDS``, ``_MONTH``), less ``__all__``, the
  names bound to a compiled regular expression (counted above) and the names bound to an instance of a rules class
  (``DEFAULT_ANSWER_RULES = AnswerRules()``: its fields are counted below). Identifiers and messages in capitals
  (``ECHO = "echo"``, a warning's text) count too: the count does not judge what a constant is for;
* **list words**: the string items of module-level tuples, lists, sets and dicts, and the words of a
  ``"...".split()`` (the hand-kept word lists), the default values of rules fields included;
* **rules fields**: the fields of frozen dataclasses whose name ends in ``Rules`` (typed, validated tunables), and of
  those, how many have a docstring naming a measurement (a ``bench/`` command or a ``tests/`` file: its reason).

    PYTHONPATH=$PWD python bench/rule_count.py                 # this checkout
    PYTHONPATH=$PWD python bench/rule_count.py --root /other/checkout
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from typing import Dict, Iterable, List

MODULES = (
    "llama_index_convrag/synthesizers/sentences.py",
    "llama_index_convrag/synthesizers/answer_rules.py",
    "llama_index_convrag/synthesizers/completion.py",
    "llama_index_convrag/synthesizers/grounding.py",
    "llama_index_convrag/chat/fallback.py",
    "llama_index_convrag/conversational/contextualize.py",
    "llama_index_convrag/conversational/referents.py",
    "llama_index_convrag/conversational/triggers.py",
    "llama_index_convrag/conversational/rewrite_output.py",
    "llama_index_convrag/_words.py",
    "llama_index_convrag/ingest/language.py",
    "llama_index_convrag/text",
)
_RE_FUNCS = frozenset({"compile", "search", "match", "fullmatch", "sub", "split", "findall", "finditer"})


def _is_pattern(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_pattern(node.left) or _is_pattern(node.right)
    return False


def _regex_calls(tree: ast.AST) -> List[ast.Call]:
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _RE_FUNCS
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("re", "regex")
                and node.args and _is_pattern(node.args[0])):
            out.append(node)
    return out


def _list_words(value: ast.AST) -> int:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "split" \
            and isinstance(value.func.value, ast.Constant) and isinstance(value.func.value.value, str):
        return len(value.func.value.value.split())
    if isinstance(value, ast.Call) and value.args:  # frozenset(...), tuple(...)
        return sum(_list_words(a) for a in value.args)
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return sum(1 if isinstance(e, ast.Constant) and isinstance(e.value, str) else _list_words(e)
                   for e in value.elts)
    if isinstance(value, ast.Dict):
        return sum(1 for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return 0


def _is_const_name(name: str) -> bool:
    bare = name.lstrip("_")
    return bool(bare) and bare.upper() == bare and any(ch.isalpha() for ch in bare) and name != "__all__"


def count_module(path: Path) -> Dict[str, int]:
    """The four counts of one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    regex_nodes = {id(c) for c in _regex_calls(tree)}
    constants = words = 0
    for node in tree.body:
        targets: List[ast.expr] = []
        value = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        names += [e.id for t in targets if isinstance(t, ast.Tuple) for e in t.elts if isinstance(e, ast.Name)]
        if not names or value is None:
            continue
        words += _list_words(value)
        if id(value) in regex_nodes:
            continue  # a compiled pattern is counted as a regular expression
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id.endswith("Rules"):
            continue  # a rules object: its fields are counted below
        constants += sum(1 for n in names if _is_const_name(n))
    fields = reasoned = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.endswith("Rules"):
            body = node.body
            for i, item in enumerate(body):
                if not isinstance(item, ast.AnnAssign):
                    continue
                fields += 1
                if item.value is not None:
                    words += _list_words(item.value)
                doc = body[i + 1] if i + 1 < len(body) else None
                text = doc.value.value if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) \
                    and isinstance(doc.value.value, str) else ""
                reasoned += "bench/" in text or "tests/" in text
    return {"regex": len(regex_nodes), "constants": constants, "list_words": words, "rules_fields": fields,
            "reasoned": reasoned}


def modules(root: Path, names: Iterable[str] = MODULES) -> List[Path]:
    out: List[Path] = []
    for name in names:
        path = root / name
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("*.py")))
        elif path.is_file():
            out.append(path)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args()
    root = Path(args.root)
    total = {"regex": 0, "constants": 0, "list_words": 0, "rules_fields": 0, "reasoned": 0}
    print("| module | regular expressions | named constants | list words | rules fields (naming a measurement) |\n"
          "|---|---|---|---|---|")
    for path in modules(root):
        counts = count_module(path)
        for key, value in counts.items():
            total[key] += value
        print(f"| {path.relative_to(root)} | {counts['regex']} | {counts['constants']} | {counts['list_words']} | "
              f"{counts['rules_fields']} ({counts['reasoned']}) |")
    print(f"| **total** | **{total['regex']}** | **{total['constants']}** | **{total['list_words']}** | "
          f"**{total['rules_fields']} ({total['reasoned']})** |")
    print(f"regular expressions + named constants: {total['regex'] + total['constants']}")


if __name__ == "__main__":
    main()
