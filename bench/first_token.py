"""From the LLM's first token to the first text a client sees: in-process (``astream_chat``) and over HTTP
(``convrag serve``'s app in a real uvicorn process), with a scripted LLM that streams a word every 5 ms.

Two answers, each its own engine setting:

- ``not held``: ``citation_mode="inline"``; the answer's first word already says it is neither empty nor the question
  restated, so no rule holds it (the bench asserts the first text seen is the LLM's first word);
- ``aligned (default)``: the engine's default; the start is held while the answer could still be a short one that
  is widened to its passage's expression (at most five words, one clause: ``StreamHold`` reason ``short``), so the
  first text waits for the sixth word (about 25 ms of the LLM at 5 ms a word).

In-process, the LLM's first token and the first delta are read on one clock in one process; over HTTP the server app
(``tests/serve/server_app.py``) appends ``time.monotonic()`` of each answer stream's first token to a file, and the
client reads the first ``delta`` event on the same clock (``CLOCK_MONOTONIC`` is one clock for the machine). Also
printed: how many generator layers (sync and async) a token passes in-process, counted on the stack when the LLM
yields its first token.

    python bench/first_token.py [--turns 30] [--token-ms 5] [--no-http]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.base.llms.types import ChatResponseAsyncGen  # noqa: E402
from llama_index.core.bridge.pydantic import Field  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine, RewriteOptions  # noqa: E402
from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from llama_index_convrag.testing import ScriptedLLM  # noqa: E402

ANSWER = ("Embedded Milvus Lite keeps the whole collection in one local file, and a Milvus server scales out across "
          "many machines when the data grows.")
PASSAGES = ["Milvus Lite is an embedded vector database stored in one file. Milvus servers scale out.",
            "BM25 is a ranking function used by search engines. Milvus computes BM25 with an analyzer.",
            "Reciprocal rank fusion merges ranked lists by summing one over sixty plus the rank."]
QUESTION = "Where does Milvus Lite keep its data?"
SETTINGS = {"not held": "inline", "aligned (default)": "aligned"}
_GEN_FLAGS = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


class Passages(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return [NodeWithScore(node=TextNode(id_=f"p{i}", text=t), score=1.0 - i / 10) for i, t in enumerate(PASSAGES)]


class PacedLLM(ScriptedLLM):
    """A ScriptedLLM whose async chat stream yields a word every ``delay`` seconds; it notes when (and through how
    many generator frames) its first token goes out."""

    delay: float = Field(default=0.005)
    first_at: List[float] = Field(default_factory=list)
    layers: List[int] = Field(default_factory=list)

    async def astream_chat(self, messages: Any, **kwargs: Any) -> ChatResponseAsyncGen:  # type: ignore[override]
        inner = await super().astream_chat(messages, **kwargs)
        return self._paced(inner)

    async def _paced(self, inner: Any) -> Any:
        first = True
        async for item in inner:
            await asyncio.sleep(self.delay)
            if first:
                self.layers.append(generator_frames())
                self.first_at.append(time.perf_counter())
                first = False
            yield item


def generator_frames() -> int:
    """Generator and async generator frames on the stack above (and including) the caller's."""
    frame, count = sys._getframe(1), 0
    while frame is not None:
        count += bool(frame.f_code.co_flags & _GEN_FLAGS)
        frame = frame.f_back
    return count


def pct(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def in_process(mode: str, turns: int, token_s: float, work: Path) -> Tuple[List[float], int, str]:
    """Per turn: ms from the LLM's first token to the first delta of ``astream_chat``; the layers; a first delta."""
    llm = PacedLLM(mode="fixed", responses=[ANSWER], chat_model=True, delay=token_s)
    store = SQLiteConversationStore(work / f"inproc-{mode}.db")
    engine = ConvRAGChatEngine.from_defaults(Passages(), llm, conversation_store=store,
                                             rewrite=RewriteOptions(strategy="none"),
                                             answer=AnswerOptions(citation_mode=mode))
    gaps, first_delta = [], ""
    for _ in range(turns + 1):  # the first is a warm-up
        llm.first_at.clear()
        response = await engine.astream_chat(QUESTION)
        seen: Optional[float] = None
        async for delta in response.async_response_gen():
            if seen is None:
                seen, first_delta = time.perf_counter(), delta
        if response.metadata["turn"].answer_source != "llm":
            raise SystemExit(f"measured the wrong path: {response.metadata['turn'].answer_source!r}")
        gaps.append(1000 * (seen - llm.first_at[0]))  # type: ignore[operator]
    store.close()
    return gaps[1:], llm.layers[-1], first_delta


def over_http(mode: str, turns: int, token_s: float, work: Path) -> List[float]:
    """Per turn: ms from the server LLM's first token to the client's first ``delta`` event."""
    from tests.serve.conftest import Server

    log = work / f"first-{mode}.log"
    folder = work / f"http-{mode}"
    folder.mkdir()
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {"CONVRAG_TEST_TOKEN_DELAY": str(token_s), "CONVRAG_TEST_FIRST_TOKEN_LOG": str(log),
           "CONVRAG_TEST_CITATION_MODE": mode, "PYTHONPATH": path}
    server = Server(folder, env=env).wait(300)
    gaps = []
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            cid = client.post("/v1/conversations", json={"title": "first token"}).json()["id"]
            for turn in range(turns + 1):
                seen = None
                with client.stream("POST", f"/v1/conversations/{cid}/messages",
                                   json={"content": f"What does the document about search say, part {turn}?"}) as r:
                    for line in r.iter_lines():
                        if seen is None and line == "event: delta":
                            seen = time.monotonic()
                llm_first = float(log.read_text().split()[-1])
                if seen is None:
                    raise SystemExit("no delta event came")
                gaps.append(1000 * (seen - llm_first))
    finally:
        server.stop()
    return gaps[1:]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--token-ms", type=float, default=5.0)
    parser.add_argument("--no-http", action="store_true", help="in-process only")
    args = parser.parse_args(argv)
    token_s = args.token_ms / 1000
    rows: Dict[str, Dict[str, List[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for label, mode in SETTINGS.items():
            gaps, layers, first = asyncio.run(in_process(mode, args.turns, token_s, work))
            if mode == "inline" and first != ANSWER.split()[0] + " ":
                raise SystemExit(f"measured the wrong path: the first text of the not-held answer is {first!r}")
            rows[label] = {"in-process": gaps}
            print(f"{label}: first text {first!r}; a token passes {layers} generator layers in-process")
            if not args.no_http:
                rows[label]["HTTP"] = over_http(mode, args.turns, token_s, work)
    print(f"\nFrom the LLM's first token to the first text a client sees (ms), scripted LLM {args.token_ms:g} ms a "
          f"word, {args.turns} turns each; os.cpu_count()={os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'answer':<18} | {'where':<10} | {'p50':>7} | {'p90':>7} | {'mean':>7}")
    print("-" * 60)
    for label, by_where in rows.items():
        for where, gaps in by_where.items():
            print(f"{label:<18} | {where:<10} | {pct(gaps, .5):7.2f} | {pct(gaps, .9):7.2f} | "
                  f"{statistics.mean(gaps):7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
