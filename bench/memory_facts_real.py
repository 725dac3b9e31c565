"""User facts extracted by the real model against LoCoMo's own per-session ``observation`` annotations.

The real-LLM tier's model (Qwen2.5-Coder-0.5B-Instruct, greedy, behind llama.cpp's OpenAI server started here) is
the facts' LLM (:class:`~llama_index_convrag.memory.facts.UserFacts`, default ``FactsOptions``; the local MiniLM
compares facts). A slice of ``../shared/data/locomo``: the first ``--sessions`` sessions of conversation(s) from
each half (``tune``: conversations 0-2, ``check``: 3-4, as docs/results/memory.md splits them). Each speaker is a
user: their utterances, in order, go through ``remember`` (extract; reconcile each fact with their stored ones).
Their observations of those sessions (LoCoMo's facts about each speaker, each with its evidence utterance) are then
compared with what was stored, by cosine of the local embeddings, the speaker's name in an observation read as "the
user" (as facts are written; with the name kept on both sides, the shared name alone lifts unrelated pairs to 0.5-0.6):

* recall (evidence): observations matched (cosine >= ``--match``) by a fact extracted from their evidence
  utterance; recall (any): matched by any fact of that speaker (active or history);
* precision: active facts that match some observation of their speaker;
* duplicates: pairs of active facts at cosine >= 0.92 (``FactsOptions.duplicate_similarity``: what reconcile calls
  the same fact) and >= 0.85;
* decisions: add / update / delete / none / duplicate; updates and deletes are the contradictions the model
  resolved; each keeps the fact it replaced or retracted as history (counted from the store). LoCoMo does not
  annotate contradictions, so facts that contradict each other and both stay active are not counted here.

Setup once: ``python -m llama_index_convrag.testing.real_llm setup``.
Run: ``PYTHONPATH=. python bench/memory_facts_real.py --sessions 1 --utterances 12`` (10-20 s per model call on a
loaded 2-core machine, more under heavy load; one extraction per utterance and one reconcile per fact with a similar
stored one).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import shared_data  # noqa: E402

from llama_index_convrag.config import OpenAICompatible  # noqa: E402
from llama_index_convrag.embeddings import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.memory import FactsOptions, UserFacts  # noqa: E402
from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from llama_index_convrag.testing.real_llm import locate, start_server  # noqa: E402

HALVES = {"tune": (0, 1, 2), "check": (3, 4)}
THRESHOLDS = (0.4, 0.5, 0.6)


def slice_of(conversation: Dict[str, Any], sessions: int, utterances: Optional[int] = None
             ) -> Tuple[List[Dict[str, Any]], Dict[str, List[Tuple[str, str]]]]:
    """``(the first utterances of the first sessions in order, {speaker: [(observation, evidence dia_id)]})``: the
    observations whose evidence is among those utterances (all of them: at most ``utterances``)."""
    conv, obs = conversation["conversation"], conversation["observation"]
    turns: List[Dict[str, Any]] = []
    for n in range(1, sessions + 1):
        turns += conv.get(f"session_{n}", [])
    turns = turns[:utterances] if utterances is not None else turns
    said = {t["dia_id"] for t in turns}
    observations: Dict[str, List[Tuple[str, str]]] = {}
    for n in range(1, sessions + 1):
        for speaker, items in (obs.get(f"session_{n}_observation") or {}).items():
            for text, evidence in items:
                ids = [str(e) for e in (evidence if isinstance(evidence, list) else [evidence])]
                if all(i in said for i in ids):
                    observations.setdefault(speaker, []).append((text, ids[0]))
    return turns, observations


def as_user(observation: str, speaker: str) -> str:
    """An observation about ``speaker`` written about "the user" (as facts are)."""
    name = re.escape(speaker)
    return re.sub(rf"\b{name}\b", "the user", re.sub(rf"\b{name}'s\b", "the user's", observation))


def unit(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    m = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1)
    return m / (np.linalg.norm(m, axis=1, keepdims=True) + 1e-12)


def score_speaker(embed: Any, speaker: str, observations: List[Tuple[str, str]], facts: List[Any],
                  match: float) -> Dict[str, Any]:
    """Recall, precision and duplicates of one speaker's stored ``facts`` against their ``observations``."""
    active = [f for f in facts if f.status == "active"]
    if not observations:
        return {"observations": 0, "facts": len(facts), "active": len(active)}
    o = unit(embed.get_text_embedding_batch([as_user(t, speaker) for t, _ in observations]))
    out: Dict[str, Any] = {"observations": len(observations), "facts": len(facts), "active": len(active)}
    if facts:
        f = unit(embed.get_text_embedding_batch([x.text for x in facts]))
        sims = o @ f.T  # observations x facts
        by_source = np.asarray([[x.source_message_id == ev for x in facts] for _, ev in observations])
        for t in THRESHOLDS:
            out[f"recall_any@{t}"] = float(np.mean((sims >= t).any(axis=1)))
            out[f"recall_evidence@{t}"] = float(np.mean(((sims >= t) & by_source).any(axis=1)))
        act = [i for i, x in enumerate(facts) if x.status == "active"]
        if act:
            out[f"precision@{match}"] = float(np.mean((sims[:, act] >= match).any(axis=0)))
            a = f[act]
            pair = a @ a.T
            upper = pair[np.triu_indices(len(act), k=1)]
            out["duplicates@0.92"] = int((upper >= 0.92).sum())
            out["duplicates@0.85"] = int((upper >= 0.85).sum())
    else:
        for t in THRESHOLDS:
            out[f"recall_any@{t}"] = out[f"recall_evidence@{t}"] = 0.0
    return out


def run(args: argparse.Namespace) -> Dict[str, Any]:
    """The halves' conversations in turn, one utterance of each at a time, until every slice is read or
    ``--max-seconds`` have passed; then each speaker scored on the observations of the utterances read."""
    data = json.loads((shared_data() / "locomo" / "locomo_dev.json").read_text())
    setup = locate()
    server = start_server(setup, n_ctx=2048, log_path=Path(tempfile.mkdtemp()) / "llama.log")
    embed = LocalMiniLMEmbedding()
    results: Dict[str, Any] = {"halves": {}, "calls": 0}
    started = time.perf_counter()
    wanted = [int(x) for x in args.conversations.split(",")] if args.conversations else None
    try:
        llm = OpenAICompatible(**server.client_kwargs(max_tokens=128))
        halves = {}
        for half, picks in HALVES.items():
            store = SQLiteConversationStore(Path(tempfile.mkdtemp()) / "facts.db")
            chosen = [i for i in picks if wanted is None or i in wanted][:args.per_half]
            halves[half] = {"store": store, "decisions": Counter(), "conversations": chosen, "read": {},
                            "facts": UserFacts(store=store, embed_model=embed, options=FactsOptions(enabled=True),
                                               llm=llm),
                            "queue": [(ci, t) for ci in chosen for t in slice_of(data[ci], args.sessions,
                                                                                 args.utterances)[0]]}
        step = 0
        while any(step < len(h["queue"]) for h in halves.values()):
            if args.max_seconds is not None and time.perf_counter() - started > args.max_seconds:
                break
            for half, h in halves.items():
                if step >= len(h["queue"]):
                    continue
                ci, turn = h["queue"][step]
                made, calls = h["facts"].remember_counted(f"{ci}:{turn['speaker']}", turn["text"],
                                                          message_id=turn["dia_id"])
                results["calls"] += calls
                h["read"][ci] = h["read"].get(ci, 0) + 1
                h["decisions"].update(d.action for d in made)
                print(f"[{half}] {turn['dia_id']} {turn['speaker']}: {len(made)} fact(s), {calls} call(s), "
                      f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
            step += 1
        for half, h in halves.items():
            speakers: List[Dict[str, Any]] = []
            for ci in h["conversations"]:
                _, observations = slice_of(data[ci], args.sessions, h["read"].get(ci, 0))
                for speaker, items in observations.items():
                    rows = h["store"].list_facts(f"{ci}:{speaker}", include_history=True, embeddings=False)
                    speakers.append({"conversation": ci, "speaker": speaker, "history": sum(
                        r.status in ("replaced", "retracted") for r in rows),
                        **score_speaker(embed, speaker, items, rows, args.match)})
            h["store"].close()
            results["halves"][half] = {"conversations": h["conversations"], "utterances": sum(h["read"].values()),
                                       "decisions": dict(h["decisions"]), "speakers": speakers}
    finally:
        server.stop()
    results["seconds"] = round(time.perf_counter() - started, 1)
    return results


def pooled(speakers: List[Dict[str, Any]], key: str, weight: str) -> float:
    """``key`` over the speakers, weighted by their ``weight`` (observations for recall, active facts else)."""
    total = sum(s.get(weight, 0) for s in speakers if key in s)
    return sum(s[key] * s[weight] for s in speakers if key in s) / total if total else float("nan")


def report(results: Dict[str, Any], match: float) -> None:
    print(f"User facts by the real model (Qwen2.5-Coder-0.5B) against LoCoMo observations, {results['calls']} model "
          f"calls, {results['seconds']:.0f} s")
    print("| half | conv | utterances | observations | facts (active) | recall any @0.4 / 0.5 / 0.6 | recall evidence "
          f"@0.4 / 0.5 / 0.6 | precision @{match} | duplicates @0.92 / 0.85 | add / update / delete / none / dup "
          "| history rows |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for half, h in results["halves"].items():
        sp = h["speakers"]
        d = h["decisions"]
        rec_any = " / ".join(f"{pooled(sp, f'recall_any@{t}', 'observations'):.2f}" for t in THRESHOLDS)
        rec_ev = " / ".join(f"{pooled(sp, f'recall_evidence@{t}', 'observations'):.2f}" for t in THRESHOLDS)
        print(f"| {half} | {','.join(map(str, h['conversations']))} | {h['utterances']} | "
              f"{sum(s['observations'] for s in sp)} | {sum(s['facts'] for s in sp)} ({sum(s['active'] for s in sp)})"
              f" | {rec_any} | {rec_ev} | {pooled(sp, f'precision@{match}', 'active'):.2f} | "
              f"{sum(s.get('duplicates@0.92', 0) for s in sp)} / {sum(s.get('duplicates@0.85', 0) for s in sp)} | "
              f"{d.get('add', 0)} / {d.get('update', 0)} / {d.get('delete', 0)} / {d.get('none', 0)} / "
              f"{d.get('duplicate', 0)} | {sum(s['history'] for s in sp)} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1, help="the first N sessions of each conversation")
    parser.add_argument("--utterances", type=int, default=None,
                        help="only the first N utterances of each conversation's slice (and the observations whose "
                             "evidence lies among them)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="stop reading utterances after this long (the halves advance together); the speakers "
                             "are scored on the utterances read")
    parser.add_argument("--per-half", type=int, default=1, help="conversations per half (tune 0-2, check 3-4)")
    parser.add_argument("--conversations", default=None, help="only these conversation indices (e.g. 0,3)")
    parser.add_argument("--match", type=float, default=0.5, help="cosine at which a fact matches an observation "
                                                                 "(precision; recall is shown at 0.4, 0.5, 0.6)")
    parser.add_argument("--json", default=None, help="write the results here too")
    args = parser.parse_args()
    results = run(args)
    report(results, args.match)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
