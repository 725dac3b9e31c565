"""Per-turn chat engine overhead, excluding LLM and retrieval time, at 10 and 200 turns of history.

Side by side in one run, with the same parts: a ScriptedLLM (instant, two calls per turn: the condense call answers
with a standalone question, the answer call with a real answer that restates nothing and that the passages support),
a retriever returning 5 fixed pre-built nodes (no Milvus), the ``compact`` response mode. Compared:

- ``llamaindex CondenseQuestion``: LlamaIndex's ``CondenseQuestionChatEngine`` over a ``RetrieverQueryEngine``;
- ``llamaindex CondensePlusContext``: LlamaIndex's ``CondensePlusContextChatEngine`` (both: in-process memory);
- ``convrag :memory:``: our engine (its defaults: aligned citations, grounding, turn record) on an in-memory SQLite
  store;
- ``convrag sqlite file``: the same, persisting every turn (messages, citations, turn record) to a WAL file;
- ``... new passages``: LlamaIndex's CondenseQuestion and ours (:memory:) with a retriever that returns 5 passages
  not seen before on every turn (the others return the same 5 every turn, so whatever either engine caches per
  passage, such as our passages' grounding terms, is read from its cache there).

Overhead = turn wall time - time inside the LLM's answer function - time inside the retriever. History grows by one
turn per measured turn, starting at the given size. The bench asserts it measured the LLM's answer: every measured
turn of ours has ``answer_source == "llm"`` and shows the scripted answer (cited), and LlamaIndex's show it too.

    PYTHONPATH=. python bench/chat_overhead.py [--quick]
    PYTHONPATH=. python bench/chat_overhead.py --profile 100   # cProfile of ours (SQLite file), 200-turn history
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.chat_engine import CondensePlusContextChatEngine, CondenseQuestionChatEngine  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.response_synthesizers import get_response_synthesizer  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine, RewriteOptions  # noqa: E402
from llama_index_convrag.synthesizers.citations import strip_markers  # noqa: E402
from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from llama_index_convrag.testing import ScriptedLLM  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.spent = 0.0


class TimedLLM(ScriptedLLM):
    """ScriptedLLM that adds the time spent producing each answer to a clock."""

    def _answer(self, *args: Any, **kwargs: Any) -> str:
        start = time.perf_counter()
        try:
            return super()._answer(*args, **kwargs)
        finally:
            CLOCK.spent += time.perf_counter() - start


class FixedRetriever(BaseRetriever):
    def __init__(self, nodes: List[NodeWithScore]) -> None:
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        start = time.perf_counter()
        out = [NodeWithScore(node=n.node, score=n.score) for n in self.nodes]
        CLOCK.spent += time.perf_counter() - start
        return out


class RotatingRetriever(FixedRetriever):
    """Returns the next 5 passages of its pool on every call; once the pool is used up, its passages come again
    with a new first sentence ("Copy 2."), so no text repeats."""

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        start = time.perf_counter()
        first = getattr(self, "_next", 0)
        self._next = first + 5
        out = []
        for i in range(first, first + 5):
            node, copy = self.nodes[i % len(self.nodes)].node, i // len(self.nodes)
            if copy:
                node = TextNode(id_=f"{node.node_id}-{copy}", text=f"Copy {copy + 1}. {node.get_content()}")
            out.append(NodeWithScore(node=node, score=1.0 - (i - first) / 10))
        CLOCK.spent += time.perf_counter() - start
        return out


CLOCK = Clock()


def _load_texts(count: Optional[int] = 5) -> List[str]:
    """The essay's first ``count`` 120-word passages (None: all of them)."""
    for parent in Path(__file__).resolve().parents:
        essay = parent / "shared" / "data" / "paul_graham"
        if essay.is_dir():
            text = " ".join(p.read_text(errors="ignore") for p in sorted(essay.rglob("*.txt")))
            words = text.split()
            if len(words) > 1000:
                n = len(words) // 120 if count is None else count
                return [" ".join(words[i * 120:(i + 1) * 120]) for i in range(n)]
    return [" ".join(f"passage{i} word{j}" for j in range(60)) for i in range(5 if count is None else count)]


def _pool() -> List[NodeWithScore]:
    """Every 120-word passage of the essay."""
    return [NodeWithScore(node=TextNode(id_=f"p{i}", text=t), score=1.0) for i, t in enumerate(_load_texts(None))]


def _history(turns: int) -> List[ChatMessage]:
    out = []
    for i in range(turns):
        out.append(ChatMessage(role="user", content=f"Question number {i} about the essay and what it says?"))
        out.append(ChatMessage(role="assistant", content=f"Answer {i}: the essay says several things [1]."))
    return out


REWRITE = "What does the essay say about it?"
#: the scripted answer: no echo of the question, held by no rule, its sentences cited by the passages' words
ANSWER = "The author wrote short stories and programmed an IBM 1401 in 9th grade."


def scripted(prompt: str) -> str:
    """The condense call (its prompt asks for a standalone question) gets :data:`REWRITE`, the answer call
    :data:`ANSWER`."""
    return REWRITE if "tandalone question" in prompt else ANSWER


def _llm() -> TimedLLM:
    return TimedLLM(mode="fn", fn=scripted, context_window=128000, num_output=256)


Builder = Callable[[List[NodeWithScore], List[ChatMessage], Path], Any]


def build_llamaindex(nodes: List[NodeWithScore], history: List[ChatMessage], tmp: Path) -> Any:
    llm = _llm()
    qe = RetrieverQueryEngine(FixedRetriever(nodes), get_response_synthesizer(llm=llm, response_mode="compact"))
    return CondenseQuestionChatEngine.from_defaults(query_engine=qe, llm=llm, chat_history=list(history))


def build_llamaindex_cpc(nodes: List[NodeWithScore], history: List[ChatMessage], tmp: Path) -> Any:
    return CondensePlusContextChatEngine.from_defaults(FixedRetriever(nodes), llm=_llm(), chat_history=list(history))


def build_llamaindex_new_passages(nodes: List[NodeWithScore], history: List[ChatMessage], tmp: Path) -> Any:
    llm = _llm()
    qe = RetrieverQueryEngine(RotatingRetriever(POOL), get_response_synthesizer(llm=llm, response_mode="compact"))
    return CondenseQuestionChatEngine.from_defaults(query_engine=qe, llm=llm, chat_history=list(history))


def _ours(path: str, rotating: bool = False) -> Builder:
    def build(nodes: List[NodeWithScore], history: List[ChatMessage], tmp: Path) -> Any:
        llm = _llm()
        store = SQLiteConversationStore(path if path == ":memory:" else tmp / f"bench_{time.time_ns()}.db")
        retriever = RotatingRetriever(POOL) if rotating else FixedRetriever(nodes)
        return ConvRAGChatEngine.from_defaults(retriever, llm, conversation_store=store,
                                               chat_history=list(history), rewrite=RewriteOptions(trigger=None),
                                               answer=AnswerOptions(response_mode="compact"))
    return build


def check_answer(response: Any) -> None:
    """The turn shows the LLM's answer (ours: its record says so, and it was not replaced)."""
    record = getattr(response, "metadata", {}).get("turn") if isinstance(getattr(response, "metadata", None),
                                                                          dict) else None
    if record is not None and record.answer_source != "llm":
        raise SystemExit(f"measured the wrong path: answer_source={record.answer_source!r} ({response.response!r})")
    if strip_markers(str(response)).replace(" .", ".").strip() != ANSWER:
        raise SystemExit(f"measured the wrong path: the answer shown is {str(response)!r}, not the LLM's {ANSWER!r}")


CPU: Dict[Tuple[int, str], List[float]] = {}
POOL: List[NodeWithScore] = []


def measure(build: Builder, nodes: List[NodeWithScore], history_turns: int, turns: int, tmp: Path,
            key: Tuple[int, str] = (0, "")) -> List[float]:
    """Wall-clock overhead per turn; the process CPU time per turn (less disturbed by other load) goes to CPU."""
    engine = build(nodes, _history(history_turns), tmp)
    engine.chat("Warm-up: what does it say?")
    out, cpu = [], []
    for i in range(turns):
        CLOCK.spent = 0.0
        start, cpu_start = time.perf_counter(), time.process_time()
        response = engine.chat(f"And what about it, part {i}?")
        out.append((time.perf_counter() - start - CLOCK.spent) * 1000)
        check_answer(response)
        cpu.append((time.process_time() - cpu_start) * 1000)
    CPU[key] = cpu
    return out


def profile(nodes: List[NodeWithScore], turns: int, top: int = 25) -> None:
    """cProfile of ``turns`` turns of our engine (SQLite file) over a 200-turn history: top entries by own time."""
    with tempfile.TemporaryDirectory() as d:
        engine = _ours("file")(nodes, _history(200), Path(d))
        for i in range(5):
            engine.chat(f"Warm-up {i}?")
        prof = cProfile.Profile()
        cpu_start = time.process_time()
        prof.enable()
        for i in range(turns):
            engine.chat(f"And what about it, part {i}?")
        prof.disable()
        print(f"{turns} turns, CPU {(time.process_time() - cpu_start) * 1000 / turns:.2f} ms/turn under cProfile")
        pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 measured turns instead of 40")
    parser.add_argument("--profile", type=int, metavar="TURNS", help="only profile ours over TURNS turns")
    args = parser.parse_args(list(argv))
    turns = 10 if args.quick else 40
    POOL[:] = _pool()
    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=t), score=1.0 - i / 10) for i, t in
             enumerate(_load_texts())]
    if args.profile is not None:
        profile(nodes, args.profile)
        return
    systems: List[Tuple[str, Builder]] = [
        ("llamaindex CondenseQuestion", build_llamaindex),
        ("llamaindex CondensePlusContext", build_llamaindex_cpc),
        ("convrag :memory:", _ours(":memory:")),
        ("convrag sqlite file", _ours("file")),
        ("llamaindex CQ, new passages", build_llamaindex_new_passages),
        ("convrag :memory:, new passages", _ours(":memory:", rotating=True)),
    ]
    rows: Dict[Tuple[int, str], List[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        for history_turns in (10, 200):
            for name, build in systems:
                rows[(history_turns, name)] = measure(build, nodes, history_turns, turns, Path(d),
                                                      (history_turns, name))
    print(f"Per-turn engine overhead (ms), excluding LLM and retriever time; {turns} turns measured; "
          "2 LLM calls per turn (condense + answer), 5 fixed nodes, compact; every answer the LLM's (checked)")
    print(f"{'history':>8} | {'system':<30} | {'p50':>8} | {'p90':>8} | {'mean':>8} | {'p50 vs LI':>9} | "
          f"{'CPU p50':>8}")
    print("-" * 95)
    for history_turns in (10, 200):
        for name, _ in systems:
            base_name = "llamaindex CQ, new passages" if "new passages" in name else systems[0][0]
            base = statistics.median(rows[(history_turns, base_name)])
            vals = sorted(rows[(history_turns, name)])
            p50, p90 = statistics.median(vals), vals[int(0.9 * (len(vals) - 1))]
            print(f"{history_turns:>8} | {name:<30} | {p50:8.2f} | {p90:8.2f} | {statistics.mean(vals):8.2f} | "
                  f"{p50 / base:8.2f}x | {statistics.median(CPU[(history_turns, name)]):8.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
