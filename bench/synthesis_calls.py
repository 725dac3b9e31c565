"""LLM calls and prompt tokens per response mode: ours vs LlamaIndex core's synthesizers, side by side.

Fixed input: the first N chunks of Paul Graham's essay (``../shared/data/paul_graham``, SentenceSplitter 200
tokens, no overlap), a scripted LLM (deterministic, records every prompt) with a small context window so that
packing matters. Prompt tokens are counted for both sides with the same tokenizer (tiktoken gpt-3.5, core's
default) over the prompts the LLM actually received.

Tables:
1. every mode, ours vs core: calls, prompt tokens, largest prompt vs the window, and for the packing modes the lower
   bound ceil(total context tokens / usable window), where usable = window - num_output - the largest template
   with the query filled - the padding (5; compact: the room kept for the existing answer, min(500, num_output):
   the answer was written within num_output tokens; core keeps 500). The compact modes split as core does
   (word-boundary windows with the prompt helper's 10% overlap), so they sit above that bound; tree_summarize
   fills its windows to the bound;
2. a long ``{chat_history}`` extra variable in the QA template: core packs as if it were empty and overflows;
3. early stop (llama_index issue 21397) when an early chunk answers: structured filtering, and the plain
   unchanged-answer signal.

Run: ``PYTHONPATH=. python bench/synthesis_calls.py [--quick] [--window 2048]``
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List

from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.default_prompts import DEFAULT_REFINE_PROMPT_TMPL, DEFAULT_TEXT_QA_PROMPT_TMPL
from llama_index.core.prompts.default_prompts import DEFAULT_TREE_SUMMARIZE_TMPL
from llama_index.core.response_synthesizers import get_response_synthesizer as core_factory
from llama_index.core.schema import Document, NodeWithScore

from llama_index_convrag.synthesizers import ResponseMode, get_response_synthesizer
from llama_index_convrag.synthesizers.packing import TiktokenTokenizer, render_chunks
from llama_index_convrag.testing import ScriptedLLM

WINDOW = 2048
NUM_OUTPUT = 256
QUERY = "What did the author work on before college?"
TOK = TiktokenTokenizer()


def find_data() -> Path:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "data" / "paul_graham" / "paul_graham_essay.txt"
        if candidate.is_file():
            return candidate
    sys.exit("shared/data/paul_graham/paul_graham_essay.txt not found above this script")


def tokens(text: str) -> int:
    return len(TOK.encode(text))


def load_nodes(n: int) -> List[NodeWithScore]:
    text = find_data().read_text(encoding="utf-8")
    nodes = SentenceSplitter(chunk_size=200, chunk_overlap=0).get_nodes_from_documents([Document(text=text)])[:n]
    for node in nodes:
        node.metadata = {}
        node.excluded_llm_metadata_keys = []
    return [NodeWithScore(node=node, score=1.0) for node in nodes]


def scripted(fn: Callable[[str], str] = lambda p: "An answer.") -> ScriptedLLM:
    return ScriptedLLM.from_fn(fn, context_window=WINDOW, num_output=NUM_OUTPUT)


def bound(total: int, overhead: int) -> int:
    return math.ceil(total / (WINDOW - NUM_OUTPUT - overhead))


def core_side(llm: Any = None, response_mode: Any = ResponseMode.COMPACT, **kw: Any) -> Any:
    """Core's factory; its no_text/context_only ignore ``llm`` and reach for Settings.llm (a default OpenAI), so
    those two are built directly with the scripted LLM."""
    from llama_index.core.response_synthesizers.context_only import ContextOnly
    from llama_index.core.response_synthesizers.no_text import NoText

    direct = {ResponseMode.NO_TEXT: NoText, ResponseMode.CONTEXT_ONLY: ContextOnly}.get(ResponseMode(response_mode))
    if direct is not None:
        return direct(llm=llm)
    return core_factory(llm=llm, response_mode=response_mode, **kw)


def run_side(factory: Callable[..., Any], llm: ScriptedLLM, nodes: List[NodeWithScore], **kw: Any) -> Dict[str, Any]:
    synth = factory(llm=llm, **kw)
    extras = kw.pop("_extras", None)
    response = synth.synthesize(QUERY, nodes, **(extras or {}))
    return {
        "calls": llm.call_count,
        "tokens": sum(tokens(p) for p in llm.prompts),
        "max": max((tokens(p) for p in llm.prompts), default=0),
        "response": response,
    }


def table_modes(nodes: List[NodeWithScore]) -> None:
    total = sum(tokens(t) for t in render_chunks([n.node.get_content() for n in nodes]))
    qa = tokens(DEFAULT_TEXT_QA_PROMPT_TMPL.format(context_str="", query_str=QUERY))
    ref = tokens(DEFAULT_REFINE_PROMPT_TMPL.format(context_str="", context_msg="", existing_answer="", query_str=QUERY))
    summ = tokens(DEFAULT_TREE_SUMMARIZE_TMPL.format(context_str="", query_str=QUERY))
    bounds = {
        "compact": bound(total, max(qa, ref) + min(500, NUM_OUTPUT)),
        "compact_accumulate": bound(total, qa + 5),
        "tree_summarize": bound(total, summ + 5),
    }
    print(f"\n## 1. Every mode: {len(nodes)} chunks, {total} context tokens, window {WINDOW}, num_output {NUM_OUTPUT}")
    print("(bound = ceil(total / usable window) for the packing modes; tree_summarize: leaf level, plus the root)")
    print(f"| mode | ours calls | core calls | bound | ours prompt tokens | core prompt tokens | ours/core tokens "
          f"| ours max prompt | core max prompt |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode in ResponseMode:
        if mode is ResponseMode.EXTRACTIVE:
            continue  # ours only (no LLM): core has no counterpart
        ours = run_side(get_response_synthesizer, scripted(), nodes, response_mode=mode)
        core = run_side(core_side, scripted(), nodes, response_mode=mode)
        assert ours["calls"] == ours["response"].metadata["llm_calls"]
        ratio = f"{ours['tokens'] / core['tokens']:.3f}" if core["tokens"] else "-"
        print(f"| {mode.value} | {ours['calls']} | {core['calls']} | {bounds.get(mode.value, '-')} | {ours['tokens']} "
              f"| {core['tokens']} | {ratio} | {ours['max']} | {core['max']} |")


def table_extras(nodes: List[NodeWithScore]) -> None:
    history = " ".join(f"user: question {i}? assistant: answer {i}." for i in range(90))
    template = PromptTemplate("Conversation so far:\n{chat_history}\n" + DEFAULT_TEXT_QA_PROMPT_TMPL)
    print(f"\n## 2. Extra variable {{chat_history}} of {tokens(history)} tokens in the QA template (compact)")
    print("| side | calls | prompt tokens | max prompt | prompts over window - num_output |")
    print("|---|---|---|---|---|")
    for name, factory in (("ours", get_response_synthesizer), ("core", core_side)):
        llm = scripted()
        synth = factory(llm=llm, text_qa_template=template)
        synth.synthesize(QUERY, nodes, chat_history=history)
        sizes = [tokens(p) for p in llm.prompts]
        over = sum(s > WINDOW - NUM_OUTPUT for s in sizes)
        print(f"| {name} | {len(sizes)} | {sum(sizes)} | {max(sizes)} | {over} |")


def _answer_when_found(prompt: str) -> str:
    found = "writing and programming" in prompt
    return json.dumps({"query_satisfied": found, "answer": "Writing short stories and programming." if found else "?"})


def _plain_refiner(prompt: str) -> str:
    match = re.search(r"We have provided an existing answer: (.*)\nWe have the opportunity", prompt, re.S)
    return match.group(1) if match else "Writing short stories and programming."


def table_early_stop(nodes: List[NodeWithScore]) -> None:
    first = next(i for i, n in enumerate(nodes) if "writing and programming" in n.node.get_content())
    print(f"\n## 3. Early stop: the answer is in chunk {first + 1} of {len(nodes)}")
    print("| mode | setting | ours calls | core calls | ours saved (metadata) | ours prompt tokens "
          "| core prompt tokens |")
    print("|---|---|---|---|---|---|---|")
    for mode in ("refine", "compact"):
        for label, fn, structured in (
            ("structured, query_satisfied", _answer_when_found, True),
            ("plain, unchanged answer", _plain_refiner, False),
        ):
            ours = run_side(
                get_response_synthesizer, scripted(fn), nodes, response_mode=mode,
                structured_answer_filtering=structured, early_stop=True,
            )
            core = run_side(core_side, scripted(fn), nodes, response_mode=mode, structured_answer_filtering=structured)
            print(f"| {mode} | {label} | {ours['calls']} | {core['calls']} | "
                  f"{ours['response'].metadata['llm_calls_saved']} | {ours['tokens']} | {core['tokens']} |")


def main() -> None:
    global WINDOW
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 chunks instead of 48")
    parser.add_argument("--window", type=int, default=WINDOW, help=f"LLM context window (default {WINDOW})")
    args = parser.parse_args()
    WINDOW = args.window
    logging.getLogger("llama_index_convrag").setLevel(logging.ERROR)  # keep the tables clean
    nodes = load_nodes(16 if args.quick else 48)
    print(f"# Synthesis calls: ours vs LlamaIndex core {__import__('llama_index.core').core.__version__}")
    table_modes(nodes)
    table_extras(nodes)
    table_early_stop(nodes)


if __name__ == "__main__":
    main()
