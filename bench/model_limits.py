"""How a real model counts a prompt against the window, and what the chat budget keeps with each count.

Qwen2.5-Coder-0.5B-Instruct (GGUF) behind llama-cpp-python's server (n_ctx 4096), the real-LLM tier. Eight tea
passages of about 450 tokens (the ones ``tests/real_llm/test_limits.py`` asks ``--top-k 8`` over) are counted with
tiktoken's ``cl100k_base`` and with the server's own tokenizer (``POST /extras/tokenize/count``); then the chat
budget (``message_fit_in``: 95% of the window minus the output limit) fits the question and the passages with
each counter, and the prompt of the passages it keeps is counted by the served model against the window.

Setup once: ``python -m llama_index_convrag.testing.real_llm setup``.
Run: ``PYTHONPATH=. python bench/limits.py [--max-tokens 48] [--window 2048]`` (a declared window at most the
served one: the prompts stay short enough for a loaded machine).
"""

from __future__ import annotations

import argparse
import json
from typing import Callable, Dict, List

from llama_index_convrag.chat.budget import message_fit_in
from llama_index_convrag.config.model_limits import probe_server, probe_tokenizer
from llama_index_convrag.config.tokens import count_tokens
from llama_index_convrag.config.llm import resolve_llm
from llama_index_convrag.testing.real_llm import locate, start_server

TOPICS = ["green tea", "black tea", "oolong", "white tea", "matcha", "rooibos", "chamomile", "earl grey"]
QUESTION = "How hot should the water be for green tea?"


def passages() -> List[str]:
    return [f"# {t}\n" + " ".join(f"For {t}, note {j}: steep the leaves in water at {70 + j} degrees."
                                  for j in range(30)) for t in TOPICS]


def fit(count: Callable[[str], int], window: int, max_tokens: int) -> Dict[str, int]:
    report = message_fit_in(question=QUESTION, chunks=passages(), count_tokens=count, context_window=window,
                            reserved_output=max_tokens)
    return {"kept_passages": len(report.kept_chunks), "budget": report.budget, "counted": report.total}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--window", type=int, default=2048, help="declared window (the server serves 4096)")
    args = parser.parse_args()
    server = start_server(locate())
    try:
        base = server.base_url
        llm = resolve_llm(base_url=base, model=server.model_alias, env={}, context_window=args.window,
                          max_tokens=args.max_tokens, timeout=600.0)
        texts = passages()
        local = sum(count_tokens(t) for t in texts)
        served = sum(llm.count_tokens(t) for t in texts)
        result: Dict[str, object] = {
            "server_states": str(probe_server(base, server.model_alias)),
            "token_count_endpoint": str(probe_tokenizer(base)),
            "passages_tokens_tiktoken": local, "passages_tokens_served_model": served,
            "ratio": round(served / local, 3), "declared_window": args.window, "served_window": server.n_ctx}
        for name, counter in (("tiktoken", count_tokens), ("served_model", llm.count_tokens)):
            kept = fit(counter, args.window, args.max_tokens)
            prompt = "\n\n".join(texts[: kept["kept_passages"]]) + f"\n\n{QUESTION}"
            needed = llm.count_tokens(prompt) + args.max_tokens
            result[f"budget_with_{name}"] = {**kept, "served_model_tokens_with_output": needed,
                                             "fits_window": needed <= args.window}
        print(json.dumps(result, indent=1))
        print("(counts do not depend on the machine's load)")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
