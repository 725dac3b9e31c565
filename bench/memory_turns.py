"""What recall adds to a chat turn: five engines side by side in one run, turns rotating between them.

One LoCoMo conversation's utterances (``../shared/data/locomo``, conversation 3) are the user's messages, in order,
over a small index (6,000 characters of Paul Graham's essay), the default chat mode, the scripted LLM (a fixed
answer), no rewrite:

* ``memory off``;
* ``recall beside retrieval``: recall on (summary and facts off), the engine as it is: the recall runs in a worker
  thread while the evidence is retrieved, with one query embedding;
* ``recall after retrieval``: the same memory with the earlier step order (retrieve, then recall, on the caller's
  thread), for comparison;
* ``beside, fields read each recall``: recall beside retrieval without the row cache
  (``EpisodicOptions(cached_rows=0)``: every recall reads its candidates' fields with a ``get``);
* ``beside, no word table``: recall beside retrieval embedding every word the bridge has not seen
  (``EpisodicOptions(word_table=False)``) instead of reading the local model's vocabulary table.

The word table is made before the turns when it is not on disk yet (its time is printed; once per machine).

Every turn after the window (earlier messages exist outside it, so the memory turns recall) counts: wall time and
this process's CPU time (``time.process_time``: every thread, the recall's worker included; Milvus Lite's server is
another process), p50 per engine, the recall's own time from the turn records, the Milvus ``get`` calls of the
recalls per turn, and the words each memory embedded per turn (the query's and the messages': those neither the table
nor its cache held). The memory writes of each turn are waited for after it and not timed. The bench asserts that each
memory turn recalled something, that its recall ran where its engine says (a worker thread, or the caller's), that
the uncached engine read fields at every recall, that the table engines read the table and the other did not, and
that the recalls of one engine, repeated with and without the table over the same rows, recall the same messages at
the same scores (the engines' collections differ: BM25 statistics span every engine's rows).

    PYTHONPATH=$PWD python bench/memory_turns.py [--turns 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import fresh_dir, shared_data  # noqa: E402
from memory_recall import TUNE, load_locomo  # noqa: E402

from llama_index.core import Document  # noqa: E402

from llama_index_convrag.chat import ConvRAGChatEngine, RewriteOptions  # noqa: E402
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.embeddings.word_table import WordTableSource  # noqa: E402
from llama_index_convrag.indices import ConvRAGIndex  # noqa: E402
from llama_index_convrag.memory import EpisodicOptions, MemoryOptions, SummaryOptions  # noqa: E402
from llama_index_convrag.memory.episodic import EpisodicMemory  # noqa: E402
from llama_index_convrag.milvus.client import MilvusTarget  # noqa: E402
from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from llama_index_convrag.testing import ScriptedLLM  # noqa: E402

OFF, BESIDE, AFTER = "memory off", "recall beside retrieval", "recall after retrieval"
UNCACHED = "beside, fields read each recall"
NO_TABLE = "beside, no word table"


def recall_after_retrieval(engine: ConvRAGChatEngine, turn: Any) -> None:
    """The earlier step order: retrieve, then recall on the caller's thread (the same parts)."""
    engine._apply_retrieval(turn)
    if engine._memory_to_read(turn):
        engine.memory.recall(turn.memory, turn.retrieval_query)  # type: ignore[union-attr]


def build(index: ConvRAGIndex, folder: Path, name: str) -> ConvRAGChatEngine:
    episodic = EpisodicOptions(cached_rows=0) if name == UNCACHED else \
        EpisodicOptions(word_table=False) if name == NO_TABLE else EpisodicOptions()
    options = MemoryOptions.off() if name == OFF else MemoryOptions(summary=SummaryOptions(enabled=False),
                                                                    episodic=episodic)
    store = SQLiteConversationStore(folder / f"chats_{'_'.join(name.split()[1:3]).strip(',')}.db")
    engine = index.as_chat_engine(llm=ScriptedLLM.from_fn(lambda prompt: "Noted."), conversation_store=store,
                                  memory=options, rewrite=RewriteOptions(strategy="none"))
    if name == AFTER:
        engine._apply_retrieval_and_memory = types.MethodType(recall_after_retrieval, engine)  # type: ignore
    return engine


def where_recalls(engine: ConvRAGChatEngine, threads: List[str], calls: List[Any]) -> None:
    """Record the thread each recall of ``engine`` runs in, and its arguments."""
    episodic = engine.memory.episodic  # type: ignore[union-attr]
    recall = episodic.recall

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        calls.append((args, kwargs))
        return recall(*args, **kwargs)

    episodic.recall = recording


class GetCounter:
    """A Milvus client counting the ``get`` calls made through it (the recall's read of its candidates' fields)."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.gets = inner, 0

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.gets += 1
        return self._inner.get(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def same_recalls(episodic: EpisodicMemory, calls: Sequence[Any], model: LocalMiniLMEmbedding,
                 target: MilvusTarget) -> int:
    """Repeat ``calls`` (a memory's recalls) on ``episodic`` and on a memory of the same collection without the word
    table; assert both recall the same messages at the same scores and bridged shares. Returns the recalls compared."""
    plain = EpisodicMemory.from_defaults(embed_model=model, target=target, collection_name=episodic.collection_name,
                                         rules=episodic.rules, word_table=False)
    for args, kwargs in calls:
        a, b = (EpisodicMemory.recall(m, *args, **kwargs).units for m in (episodic, plain))  # not the recording one
        assert [(u.position, u.score, u.bridged) for u in a] == [(u.position, u.score, u.bridged) for u in b], \
            f"the word table changed a recall of {args[0]!r}"
    plain.close()
    return len(calls)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=40, help="user messages per engine (the first ~4 are inside the "
                    "window and not counted)")
    args = ap.parse_args(argv)
    conv = load_locomo()[TUNE[-1] + 1]
    lines = [u.text for u in conv["units"]][:args.turns]
    model = LocalMiniLMEmbedding()
    model.warm_up()
    table = WordTableSource(model)
    if not table.complete:
        c0, t0 = time.process_time(), time.perf_counter()
        table.ensure()
        print(f"made the word table ({len(table.parts)} parts): {time.perf_counter() - t0:.1f} s, "
              f"{time.process_time() - c0:.1f} s CPU")
    folder = fresh_dir("memory_turns")
    target = MilvusTarget(uri=str(folder / "memory.db"))
    essay = (shared_data() / "paul_graham" / "paul_graham_essay.txt").read_text(encoding="utf-8")[:6000]
    index = ConvRAGIndex.from_documents([Document(text=essay, id_="essay")], collection_name="recall_turns",
                                        embed_model=model, target=target)
    names = [OFF, BESIDE, AFTER, UNCACHED, NO_TABLE]
    engines = {name: build(index, folder, name) for name in names}
    threads: Dict[str, List[str]] = {BESIDE: [], AFTER: [], UNCACHED: [], NO_TABLE: []}
    gets: Dict[str, GetCounter] = {}
    calls: Dict[str, List[Any]] = {name: [] for name in threads}
    for name, seen in threads.items():
        where_recalls(engines[name], seen, calls[name])
        episodic = engines[name].memory.episodic  # type: ignore[union-attr]
        episodic._client = gets[name] = GetCounter(episodic._client)
    got: Dict[str, List[int]] = {n: [] for n in gets}
    window = MemoryOptions().episodic.window
    wall: Dict[str, List[float]] = {n: [] for n in names}
    cpu: Dict[str, List[float]] = {n: [] for n in names}
    recall_ms: Dict[str, List[float]] = {n: [] for n in gets}
    load_before = os.getloadavg()[0]
    for t, line in enumerate(lines):
        for name in names[t % len(names):] + names[:t % len(names)]:  # each engine at each place in turn
            before_gets = gets[name].gets if name in gets else 0
            c0, t0 = time.process_time(), time.perf_counter()
            response = engines[name].chat(line)
            elapsed, spent = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
            reads = gets[name].gets - before_gets if name in gets else 0
            assert engines[name].flush_memory(60), "memory writes did not finish"
            if 2 * t <= window + 2:  # every earlier message is still in the recent window
                continue
            wall[name].append(elapsed)
            cpu[name].append(spent)
            if name != OFF:
                recall = response.metadata["turn"].memory["recall"]
                assert recall is not None and recall["units"], f"{name}: the turn recalled nothing"
                recall_ms[name].append(recall["latency_ms"])
                got[name].append(reads)
    load_after = os.getloadavg()[0]
    assert threads[BESIDE] and all(n.startswith("convrag-recall") for n in threads[BESIDE]), threads[BESIDE]
    assert threads[AFTER] and all(n == threading.main_thread().name for n in threads[AFTER]), threads[AFTER]
    assert threads[UNCACHED] and all(n.startswith("convrag-recall") for n in threads[UNCACHED]), threads[UNCACHED]
    assert all(n == 1 for n in got[UNCACHED]), f"the uncached engine did not read fields at every recall: {got}"
    words = {n: engines[n].memory.episodic._words for n in gets}  # type: ignore[union-attr]
    assert all((w._table is None) == (n == NO_TABLE) for n, w in words.items()), "a table engine has no table"
    assert table.get() is not None, "the word table was not read"
    compared = same_recalls(engines[BESIDE].memory.episodic, calls[BESIDE], model, target)  # type: ignore
    for engine in engines.values():
        engine.close(60)

    p50 = {n: statistics.median(wall[n]) for n in names}
    c50 = {n: statistics.median(cpu[n]) for n in names}
    print(f"Turn time, {len(wall[OFF])} turns per engine past the window (default chat mode, scripted LLM, engines "
          f"rotating; load average {load_before:.1f} before, {load_after:.1f} after):")
    print("| engine | wall p50 ms | vs off | CPU p50 ms | vs off | recall itself p50 ms | gets per recall | words "
          "embedded per turn |")
    print("|---|---|---|---|---|---|---|---|")
    for n in names:
        own = f"{statistics.median(recall_ms[n]):.1f}" if n in recall_ms else ""
        reads = f"{statistics.mean(got[n]):.2f}" if n in got else ""
        embedded = f"{len(words[n]) / len(lines):.2f}" if n in words else ""
        print(f"| {n} | {p50[n]:.1f} | {p50[n] - p50[OFF]:+.1f} | {c50[n]:.1f} | {c50[n] - c50[OFF]:+.1f} | {own} | "
              f"{reads} | {embedded} |")
    print(f"{compared} recalls repeated with and without the word table over the same rows: the same messages at the "
          f"same scores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
