"""Real answers that the engine would replace: human answers of ``../shared/data`` given as the LLM's answer.

Each answer a person wrote (CAsT 2022's gold responses, CANARD's QuAC answers, RGB's gold answers in English and
Chinese) is checked as the engine checks an LLM's answer (``chat.fallback.no_answer`` against the question as the
user typed it): an answer counted here would be replaced by the extractive answer. The target is 0. Per set and per
half (dialogues or questions in file order: first half, second half); the replaced answers are printed.

    PYTHONPATH=$PWD python bench/real_answers_replaced.py
    PYTHONPATH=$PWD python bench/real_answers_replaced.py --echo-rules   # also each echo rule off or set otherwise
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._data import shared_data  # noqa: E402
from llama_index_convrag.chat.fallback import DEFAULT_ECHO_RULES, EchoRules, no_answer  # noqa: E402
from llama_index_convrag.evaluation.datasets import load_canard, load_cast_turns  # noqa: E402

Pair = Tuple[str, str]  # (question, answer)


def collect() -> Dict[str, List[Pair]]:
    data = shared_data()
    cast = [(t.utterance, t.answer) for d in load_cast_turns(data / "trec_cast" / "turns.jsonl", years=[2022])
            for t in d.turns if t.answer and t.answer.strip()]
    canard = [(t.utterance, t.answer) for d in load_canard(data / "canard" / "dialogues_dev.jsonl")
              for t in d.turns if t.answer and t.answer.strip()]
    sets = {"CAsT 2022 responses": cast, "CANARD answers": canard}
    for name in ("en_fact", "zh_fact"):
        rows = [json.loads(line) for line in (data / "rgb" / f"{name}.json").open(encoding="utf-8")]
        pairs = []
        for row in rows:
            gold = row["answer"]
            first = gold[0] if isinstance(gold, list) else gold
            first = first[0] if isinstance(first, list) else first
            pairs.append((row["query"], str(first)))
        sets[f"RGB {name} answers"] = pairs
    return sets


#: name -> the echo rules checked under (``--echo-rules``).
VARIANTS: Dict[str, EchoRules] = {
    "default": DEFAULT_ECHO_RULES,
    "cover 0.5": replace(DEFAULT_ECHO_RULES, cover=0.5),
    "no yes/no cues": replace(DEFAULT_ECHO_RULES, yes_no=()),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--echo-rules", action="store_true", help="every variant of VARIANTS, not only the default")
    args = parser.parse_args()
    sets = collect()
    for variant in (VARIANTS if args.echo_rules else ["default"]):
        print(f"\n{variant}:")
        report(sets, VARIANTS[variant])


def report(sets: Dict[str, List[Pair]], rules: EchoRules) -> None:
    total = replaced_total = 0
    print("| set | answers | replaced: all | first half | second half |\n|---|---|---|---|---|")
    shown: List[str] = []
    for name, pairs in sets.items():
        flags = [no_answer(answer, question, rules) for question, answer in pairs]
        half = len(pairs) // 2
        count = sum(f is not None for f in flags)
        first, second = sum(f is not None for f in flags[:half]), sum(f is not None for f in flags[half:])
        print(f"| {name} | {len(pairs)} | {count} | {first} | {second} |")
        total += len(pairs)
        replaced_total += count
        shown += [f"{name}: {q!r} -> {a!r} ({f})" for (q, a), f in zip(pairs, flags) if f is not None]
    print(f"| all | {total} | {replaced_total} | | |")
    for line in shown:
        print(line)


if __name__ == "__main__":
    main()
