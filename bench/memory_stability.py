"""A long conversation with every memory part on: does a turn stay as fast and as small at the end as at the start?

One conversation of ``--turns`` turns over a real index (Paul Graham's essay in Milvus Lite, the local MiniLM) and
the scripted LLM, with ``MemoryOptions`` recall + summary + facts on. The user's messages are LoCoMo utterances in
order (``../shared/data/locomo``, the next utterance is the scripted answer); the scripted summary fold returns the
old summary with the new messages appended, so it outgrows the cap every time and the cap (shorten, then cut) is
what bounds it; the scripted fact extractor states each "I ..." sentence as a fact, so facts pile up. Per turn: the
time of the turn (``engine.chat``, to its response), then the time of its memory writes (``flush_memory``: they run
after the turn, on the writer thread), the one budget's report (the tokens of each block, the total against the
budget) and the answer prompt's tokens. Printed: the turn time p50 / p90 of the first and the last 100 turns
(turns 11-110 against the last 100: the first ten warm caches), their ratio, the same for the writes, the largest
total and each block's largest against the budget, turns over budget, the summary's largest against its cap, the
facts and recalled messages the last turn saw.

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/memory_stability.py [--turns 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import fresh_dir, shared_data  # noqa: E402

from llama_index.core import Document  # noqa: E402

from llama_index_convrag.chat import RewriteOptions  # noqa: E402
from llama_index_convrag.config.tokens import count_tokens  # noqa: E402
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.indices import ConvRAGIndex  # noqa: E402
from llama_index_convrag.memory import FactsOptions, MemoryOptions, SummaryOptions  # noqa: E402
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus  # noqa: E402
from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from llama_index_convrag.testing import ScriptedLLM  # noqa: E402

SPAN = 100  # turns compared at each end
WARM = 10  # first turns left out of the first span (caches, the first Milvus searches)


def utterances() -> List[str]:
    """LoCoMo's utterances, conversation by conversation, session by session, in order."""
    data = json.loads((shared_data() / "locomo" / "locomo_dev.json").read_text(encoding="utf-8"))
    out: List[str] = []
    for conv in data:
        c = conv["conversation"]
        for s in sorted(int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k)):
            out += [" ".join(u["text"].split()) for u in c[f"session_{s}"] if u.get("text", "").strip()]
    return out


def scripted(lines: Sequence[str], answer_prompts: List[Tuple[int, str]]) -> Tuple[ScriptedLLM, Dict[str, int]]:
    """The scripted LLM of the run and its call counts by kind; each answer prompt is appended to ``answer_prompts``
    with its turn (``calls["turn"]``, set by the caller), and the turn's answer is the utterance after its question."""
    calls = {"turn": 0, "answer": 0, "fold": 0, "shorten": 0, "extract": 0, "reconcile": 0}

    def reply(prompt: str) -> str:
        if prompt.startswith("You keep a short running summary"):
            calls["fold"] += 1
            old = prompt.split("Summary so far:", 1)[1].split("New messages:", 1)[0].strip()
            new = prompt.split("New messages:", 1)[1].split("New summary:", 1)[0].strip()
            return ("" if old == "(none yet)" else old + " ") + " ".join(new.splitlines())
        if prompt.startswith("Shorten this conversation summary"):
            calls["shorten"] += 1  # as long as before: the cut at the cap has to bound it
            return prompt.split("Summary:\n", 1)[1].split("Shortened summary:", 1)[0].strip()
        if prompt.startswith("Read the user's message"):
            calls["extract"] += 1
            message = prompt.split("User message:", 1)[1].split("Facts:", 1)[0]
            facts = [s.strip() for s in re.split(r"(?<=[.!?])\s+", message) if s.strip().startswith("I ")]
            return "\n".join(f"- The user says: {f}" for f in facts[:2]) or "NONE"
        if prompt.startswith("A new fact about the user"):
            calls["reconcile"] += 1
            return "ADD"
        calls["answer"] += 1
        answer_prompts.append((calls["turn"], prompt))
        return lines[2 * calls["turn"] + 1]

    return ScriptedLLM.from_fn(reply), calls


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=1000)
    args = ap.parse_args()
    if args.turns < WARM + 2 * SPAN:
        ap.error(f"--turns must be at least {WARM + 2 * SPAN}, got {args.turns}")
    lines = utterances()
    if len(lines) < 2 * args.turns:
        ap.error(f"LoCoMo holds {len(lines)} utterances: at most {len(lines) // 2} turns")
    work = fresh_dir("memory_stability")
    target = MilvusTarget(uri=str(work / "milvus.db"))
    client = connect_milvus(target)
    embed = LocalMiniLMEmbedding()
    essay = (shared_data() / "paul_graham" / "paul_graham_essay.txt").read_text(encoding="utf-8")
    index = ConvRAGIndex.from_documents([Document(text=essay, id_="essay")], collection_name="essay",
                                        embed_model=embed, client=client, target=target)
    store = SQLiteConversationStore(work / "chats.db")
    answer_prompts: List[Tuple[int, str]] = []
    llm, calls = scripted(lines, answer_prompts)
    llm.context_window, llm.num_output = 8192, 512
    options = MemoryOptions(summary=SummaryOptions(max_tokens=400), facts=FactsOptions(enabled=True))
    engine = index.as_chat_engine(llm=llm, conversation_store=store, memory=options,
                                  rewrite=RewriteOptions(strategy="none"))
    turn_ms: List[float] = []
    write_ms: List[float] = []
    totals: List[int] = []
    prompts: List[int] = []
    blocks: Dict[str, int] = {}
    budget = 0
    over = 0
    retried = unasked = 0
    last: Any = None
    started = time.perf_counter()
    for t in range(args.turns):
        calls["turn"] = t
        t0 = time.perf_counter()
        response = engine.chat(lines[2 * t])
        t1 = time.perf_counter()
        assert engine.flush_memory(120), "memory writes did not finish"
        write_ms.append(1000 * (time.perf_counter() - t1))
        turn_ms.append(1000 * (t1 - t0))
        report = response.metadata["trim_report"]
        budget = report.budget
        totals.append(report.total)
        over += report.total > report.budget
        for name, n in report.tokens.items():
            blocks[name] = max(blocks.get(name, 0), n)
        mine = [p for turn, p in answer_prompts if turn == t]
        unasked += not mine  # answered without the LLM (the engine's own rules)
        retried += len(mine) > 1  # the engine's answer fallback asked again (a reply it does not show)
        prompts += [max(count_tokens(p) for p in mine)] if mine else []
        llm.reset_calls()
        last = response
        if (t + 1) % 100 == 0:
            print(f"  turn {t + 1}: {statistics.median(turn_ms[-100:]):.0f} ms p50 over the last 100, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    memory = engine.memory
    cid = engine.conversation_id
    record = last.metadata["turn"]
    # the bench measured the path it names: every part ran, and the last turn read each of them
    assert memory is not None and memory.parts == ["recall", "summary", "facts"]
    assert record.memory["recall"]["units"] and record.memory["summary"] is not None and record.memory["facts"]
    assert not memory.writer.failures, memory.writer.failures[:3]
    summary = memory.summary("local", cid)
    versions = memory.summary_versions("local", cid)
    first, end = turn_ms[WARM:WARM + SPAN], turn_ms[-SPAN:]
    wfirst, wend = write_ms[WARM:WARM + SPAN], write_ms[-SPAN:]
    print(f"turns: {args.turns} (messages {2 * args.turns}), load average {os.getloadavg()[0]:.1f}, "
          f"wall {time.perf_counter() - started:.0f} s")
    print(f"turn time p50 / p90: turns {WARM + 1}-{WARM + SPAN} {statistics.median(first):.0f} / "
          f"{pct(first, 0.9):.0f} ms, last {SPAN} {statistics.median(end):.0f} / {pct(end, 0.9):.0f} ms; "
          f"ratio p50 {statistics.median(end) / statistics.median(first):.2f}")
    print(f"memory writes after the turn p50 / p90: first {statistics.median(wfirst):.0f} / {pct(wfirst, 0.9):.0f} "
          f"ms, last {statistics.median(wend):.0f} / {pct(wend, 0.9):.0f} ms; ratio p50 "
          f"{statistics.median(wend) / statistics.median(wfirst):.2f}")
    print(f"budget {budget} tokens: largest total {max(totals)} (turns over budget: {over}); mean total first "
          f"{statistics.mean(totals[WARM:WARM + SPAN]):.0f}, last {statistics.mean(totals[-SPAN:]):.0f}")
    print("largest tokens per block: " + ", ".join(f"{k} {v}" for k, v in blocks.items()))
    print(f"answer prompt tokens: largest {max(prompts)}, mean first {statistics.mean(prompts[WARM:WARM + SPAN]):.0f}"
          f", last {statistics.mean(prompts[-SPAN:]):.0f}; the whole history at the end: "
          f"{sum(count_tokens(m.content) for m in store.get_conversation(cid))} tokens")
    print(f"summary: {len(versions)} versions, cap {options.summary.max_tokens}, largest "
          f"{max(v.tokens for v in versions)} tokens, now {summary.tokens if summary else 0}")
    print(f"facts stored: {len(memory.facts('local'))}; in the last prompt: {len(record.memory['facts'])}; "
          f"recalled at the last turn: {len(record.memory['recall']['units'])}, kept "
          f"{len(record.memory['recalled_kept'])}; recall rows {memory.episodic.count('local', cid)}")
    print("LLM calls: " + ", ".join(f"{k} {v}" for k, v in calls.items() if k != "turn")
          + f" (turns whose answer was asked again: {retried}; answered without an answer call: {unasked})")
    engine.close(60)
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
