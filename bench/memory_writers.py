"""How fast the memory writes of many conversations drain, by the number of writer threads, side by side in one run.

``--conversations`` conversations of ``--turns`` turns each are stored first (LoCoMo utterances as the user's
messages, the next utterance as the answer; SQLite). Then, for each writer count in ``--writers``, a fresh
``ConversationMemory`` (recall, the summary and user facts on, a recent window of 2 messages, Milvus Lite and the
local MiniLM, a scripted memory LLM that waits ``--llm-ms`` per call as a served model would) is given every turn's
writes at once, in the turns' order (:meth:`ConversationMemory.schedule`, as each turn's commit does), and the time
until they have all run is measured. Rounds alternate the order of the writer counts. Printed per writer count: the
drain time p50 over the rounds, writes per second, and the ratio against the first count; the bench asserts that
every write ran without failure and indexed its turn, and that each conversation's writes ran in its turns' order.

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/memory_writers.py [--writers 1,4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import fresh_dir  # noqa: E402
from memory_stability import utterances  # noqa: E402

from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.memory import (  # noqa: E402
    ConversationMemory,
    EpisodicOptions,
    FactsOptions,
    MemoryOptions,
    SummaryOptions,
)
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus  # noqa: E402
from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from llama_index_convrag.testing import ScriptedLLM  # noqa: E402

OWNER = "bench"


def memory_llm(llm_ms: float) -> ScriptedLLM:
    """Folds into one sentence, states the user's message as a fact, adds every fact; each call waits ``llm_ms``."""

    def reply(prompt: str) -> str:
        time.sleep(llm_ms / 1000)
        if prompt.startswith("You keep a short running summary"):
            return "The user and the assistant talked."
        if prompt.startswith("Read the user's message"):
            return "- " + prompt.split("User message:", 1)[1].split("Facts:", 1)[0].strip()[:200]
        return "ADD"

    return ScriptedLLM.from_fn(reply)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writers", default="1,4", help="comma list of writer counts")
    ap.add_argument("--conversations", type=int, default=16)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--llm-ms", type=float, default=200.0, help="each memory LLM call's wait")
    args = ap.parse_args()
    counts = [int(x) for x in args.writers.split(",")]
    lines = utterances()
    work = fresh_dir("memory_writers")
    target = MilvusTarget(uri=str(work / "milvus.db"))
    client = connect_milvus(target)
    embed = LocalMiniLMEmbedding()
    store = SQLiteConversationStore(work / "chats.db")
    turns: List[Tuple[str, str]] = []  # (conversation, user message id) in the order the turns were committed
    at = 0
    cids = [store.create_conversation(OWNER).id for _ in range(args.conversations)]
    for t in range(args.turns):
        for cid in cids:
            user, answer = store.begin_turn(cid, lines[at])
            store.finalize_message(answer.id, content=lines[at + 1], status="complete")
            turns.append((cid, user.id))
            at += 2
    drains: Dict[int, List[float]] = {n: [] for n in counts}
    for r in range(args.rounds):
        for n in (counts if r % 2 == 0 else counts[::-1]):
            name = f"writers_{n}_{r}"
            options = MemoryOptions(episodic=EpisodicOptions(window=2, collection_name=name),
                                    summary=SummaryOptions(window=2), facts=FactsOptions(enabled=True), writers=n)
            memory = ConversationMemory.from_defaults(options, store=store, embed_model=embed, client=client,
                                                      target=target, llm=memory_llm(args.llm_ms))
            memory.episodic.ensure_collection()
            t0 = time.perf_counter()
            for cid, uid in turns:
                memory.schedule(OWNER, cid, uid)
            assert memory.flush(600), "the writes did not finish"
            drains[n].append(time.perf_counter() - t0)
            # the bench measured the writes it names: each ran, indexed its turn, in its conversation's order
            assert memory.writer.failed == 0, list(memory.writer.failures)[:3]
            results = [res.value for res in memory.writer.results]
            assert len(results) == len(turns) and all(w.indexed >= 2 for w in results)
            for cid in cids:
                assert [w.user_message_id for w in results if w.conversation_id == cid] == \
                    [uid for c, uid in turns if c == cid]
            client.drop_collection(name)
            for cid in cids:
                store.clear_summary(OWNER, cid)
            store.delete_facts(OWNER)
            print(f"  round {r + 1}, {n} writers: {drains[n][-1]:.1f} s", file=sys.stderr, flush=True)
    base = statistics.median(drains[counts[0]])
    print(f"{len(turns)} turns' writes ({args.conversations} conversations x {args.turns} turns; recall, summary and "
          f"facts on; memory LLM {args.llm_ms:.0f} ms a call), {args.rounds} rounds alternating, load average "
          f"{os.getloadavg()[0]:.1f}:")
    for n in counts:
        d = statistics.median(drains[n])
        print(f"  {n} writer(s): drained in {d:.1f} s p50 ({len(turns) / d:.1f} turns' writes/s), "
              f"{d / base:.2f}x of {counts[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
