"""Two parts of a served turn alone, without HTTP: the store calls of one turn and the SSE coalescing of one answer.

1. Store calls: a SQLite conversation store on a temporary file, ``--turns`` turns of one conversation, each made of
   the calls ``convrag serve`` makes (the key check, the owner check, the turn port's ``load``: the claim, the history
   window, the user message and the placeholder; its ``commit``: the answer, its record, the release); milliseconds
   per call and per turn (mean).
2. Coalescing: ``serve.sse.coalesced`` over ``--tokens`` deltas that arrive every ``--token-ms`` ms between a
   ``start`` and a ``done`` event, with the server's default window (``ServeState.stream_window_s``); how many events
   go out, on an idle event loop.

    python bench/serve_parts.py            # 300 turns; 69 deltas at 5 ms
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import AsyncGenerator, Dict, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llama_index_convrag.serve.access import owned_conversation  # noqa: E402
from llama_index_convrag.serve.auth import resolve_user  # noqa: E402
from llama_index_convrag.serve.sse import coalesced  # noqa: E402
from llama_index_convrag.serve.state import ServeState  # noqa: E402
from llama_index_convrag.chat.port import TurnOutcome, TurnRequest  # noqa: E402
from llama_index_convrag.serve.turn_store import ServedTurn  # noqa: E402
from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402

ANSWER_CHARS = 360  # about the load bench's scripted answer
RECORD = {"padding": "x" * 3000}  # about a turn record's size


def store_calls(turns: int) -> Dict[str, float]:
    """Mean milliseconds of each store call of a turn, over ``turns`` turns of one conversation."""
    with tempfile.TemporaryDirectory() as work:
        store = SQLiteConversationStore(Path(work) / "chats.db")
        _, key = store.create_key("bench")
        state = ServeState(store=store, engine_for=lambda cid, s: None)
        cid = store.create_conversation("bench").id
        spent = dict.fromkeys(("key", "owner", "load", "commit"), 0.0)

        def timed(name: str, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
            began = time.perf_counter()
            out = fn(*args, **kwargs)
            spent[name] += time.perf_counter() - began
            return out

        for _ in range(turns):
            user = timed("key", resolve_user, store, key)
            timed("owner", owned_conversation, state, cid, user)
            port = ServedTurn(state)
            context = timed("load", port.load, TurnRequest(cid, "What is BM25?", window=3))
            timed("commit", port.commit, TurnOutcome(cid, context.placeholder.id, "a" * ANSWER_CHARS, "complete",
                                                     None, (), RECORD))
        store.close()
    out = {name: 1000 * s / turns for name, s in spent.items()}
    out["turn"] = sum(out.values())
    return out


async def coalesced_events(tokens: int, token_ms: float, window_s: float) -> Tuple[int, int]:
    """``(events in, events out)`` of one answer through :func:`coalesced`."""
    async def answer() -> AsyncGenerator[Tuple[str, dict], None]:
        yield "start", {}
        for _ in range(tokens):
            await asyncio.sleep(token_ms / 1000)
            yield "delta", {"text": "x "}
        yield "done", {}

    out = 0
    async for _ in coalesced(answer(), window_s):
        out += 1
    return tokens + 2, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=69)
    parser.add_argument("--token-ms", type=float, default=5.0)
    args = parser.parse_args()
    calls = store_calls(args.turns)
    print(f"store calls of one turn (SQLite file, mean of {args.turns} turns of one conversation; ms): "
          + ", ".join(f"{k} {v:.3f}" for k, v in calls.items()))
    window = ServeState(store=SQLiteConversationStore(":memory:"), engine_for=lambda cid, s: None).stream_window_s
    events_in, events_out = asyncio.run(coalesced_events(args.tokens, args.token_ms, window))
    print(f"SSE coalescing, {window * 1000:g} ms window, a delta every {args.token_ms:g} ms: {events_in} events "
          f"in ({args.tokens} deltas), {events_out} out")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
