"""Episodic recall on LoCoMo (``../shared/data/locomo``: 5 conversations, 997 questions with annotated evidence).

Evidence recall@5/10/25 per question category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial),
side by side in one run, over the same utterances (one LoCoMo utterance = one unit, so k=10 is 10 utterances), each
question asked at the end of its conversation:

* ``window``: the last k utterances (a plain sliding window);
* ``hybrid per turn``: one utterance per chunk (its session date and speaker in the text) in a collection of our
  layout, searched by the package's default ``MilvusHybridRetriever`` (weighted fusion with dense feedback),
  filtered to the conversation;
* ``episodic ...``: :class:`~llama_index_convrag.memory.episodic.EpisodicMemory` with the :class:`RecallRules`
  named (the defaults, and the variants that show what each mechanism adds: the context lists, the spread to
  neighbours, the named-speaker step);
* ``window 6 + episodic k``: what a prompt holds with the engine's defaults: the last 6 utterances, then k - 6
  recalled ones from before them.

Every figure is printed for all questions and for each half of the conversations: ``tune`` (conversations 0-2,
495 questions: where the rules were chosen) and ``check`` (3-4, 502 questions: confirmation). Then: recall latency
p50 / p90 and CPU p50 (Milvus Lite, sync, the query embedding cached as after the turn's document retrieval, with and
without the row cache, and not cached),
a turn's time with recall on and off (two engines, alternating turns, the recall's own time from the turn
records), the tokens of the recalled block (k=10) against the whole history, and what the no-LLM summary (salient names and
numbers) is worth beside recall: the answer words each holds.

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/memory_recall.py [--quick] [--variants default,own]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import cached_embeddings, fresh_dir, shared_data  # noqa: E402

from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.bridge.pydantic import PrivateAttr  # noqa: E402
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters  # noqa: E402

from llama_index.core import Document  # noqa: E402

from llama_index_convrag.chat import RewriteOptions  # noqa: E402
from llama_index_convrag.config.tokens import count_tokens  # noqa: E402
from llama_index_convrag.indices import ConvRAGIndex  # noqa: E402
from llama_index_convrag.memory import MemoryOptions, SummaryOptions  # noqa: E402
from llama_index_convrag.storage.conversation import SQLiteConversationStore  # noqa: E402
from llama_index_convrag.testing import ScriptedLLM  # noqa: E402
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding  # noqa: E402
from llama_index_convrag.memory.episodic import EpisodicMemory, unit_texts  # noqa: E402
from llama_index_convrag.text import stem  # noqa: E402
from llama_index_convrag.memory.rules import RecallRules  # noqa: E402
from llama_index_convrag.memory.salient import salient_summary  # noqa: E402
from llama_index_convrag.memory.units import MemoryUnit  # noqa: E402
from llama_index_convrag.milvus.client import MilvusTarget, connect_milvus  # noqa: E402
from llama_index_convrag.milvus.schema import create_collection, default_spec  # noqa: E402
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever  # noqa: E402

KS = (5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
TUNE = (0, 1, 2)  # conversations the rules were chosen on; 3 and 4 confirm
OWNER = "locomo"
#: Variants of the episodic rules: what each mechanism adds (parameters, nothing patched).
VARIANTS: Dict[str, RecallRules] = {
    "own text only": RecallRules(context_weight=0.0, forward_spread=0.0, backward_spread=0.0, second_spread=0.0,
                                 speaker_boost=0.0, bridge_boost=0.0),
    "+ context lists": RecallRules(forward_spread=0.0, backward_spread=0.0, second_spread=0.0, speaker_boost=0.0,
                                   bridge_boost=0.0),
    "+ spread": RecallRules(second_spread=0.0, speaker_boost=0.0, bridge_boost=0.0),
    "+ named speaker": RecallRules(second_spread=0.0, bridge_boost=0.0),
    "+ vocabulary bridge": RecallRules(second_spread=0.0),
    "+ second spread (default)": RecallRules(),
    "default + second spread 0.3": RecallRules(second_spread=0.3),
    "default + bridge 0.2": RecallRules(bridge_boost=0.2),
    "default + bridge at 0.6": RecallRules(bridge_threshold=0.6),
    "default + speaker 0.2": RecallRules(speaker_boost=0.2),
    "default + speaker 0.6": RecallRules(speaker_boost=0.6),
    "default + dense 0.5": RecallRules(dense_weight=0.5),
    "default + depth 100": RecallRules(depth=100),
}
DEFAULT = "+ second spread (default)"
assert VARIANTS[DEFAULT] == RecallRules(), "the variant named default is the default rules"


# -- data -------------------------------------------------------------------------------------------------------
def load_locomo() -> List[Dict[str, Any]]:
    """Per conversation: its units (one per utterance; an image's caption is part of what was said) and its
    scorable questions (evidence ids that exist in the conversation)."""
    data = json.loads((shared_data() / "locomo" / "locomo_dev.json").read_text(encoding="utf-8"))
    out = []
    for ci, conv in enumerate(data):
        c = conv["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k))
        units, where = [], {}
        for s in sessions:
            date = c[f"session_{s}_date_time"]
            for t in c[f"session_{s}"]:
                text = t["text"] + (f" [shares {t['blip_caption']}]" if t.get("blip_caption") else "")
                where[t["dia_id"]] = len(units)
                units.append(MemoryUnit(owner=OWNER, conversation_id=f"locomo-{ci}", position=len(units),
                                        message_id=t["dia_id"], speaker=t["speaker"], text=text, date=date,
                                        session=str(s), turn=len(units) // 2))
        questions = []
        for q in conv["qa"]:
            ev = {where[e] for x in q["evidence"] for e in re.split(r"[;\s]+", x) if e in where}
            if ev:
                questions.append({"question": q["question"], "category": q["category"], "evidence": ev,
                                  "answer": str(q.get("answer", q.get("adversarial_answer", "")))})
        out.append({"id": conv["sample_id"], "units": units, "questions": questions})
    return out


class TableEmbedding(BaseEmbedding):
    """Texts from a precomputed table (the bench embeds every unit text once, cached on disk); queries, and texts the
    table lacks (the bridge step's single words), from the real model."""

    _table: Dict[str, List[float]] = PrivateAttr()
    _model: BaseEmbedding = PrivateAttr()

    def __init__(self, table: Dict[str, List[float]], model: BaseEmbedding) -> None:
        super().__init__(model_name="table+" + model.model_name)
        self._table = table
        self._model = model

    @property
    def dimension(self) -> int:
        return 384

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._model.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return await self._model.aget_query_embedding(query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._table))
        if missing:
            self._table.update(zip(missing, self._model.get_text_embedding_batch(missing)))
        return [self._table[t] for t in texts]


# -- scoring ----------------------------------------------------------------------------------------------------
Ranked = Dict[Tuple[int, int], List[int]]  # (conversation, question) -> positions, best first


def recall_rows(convs: Sequence[Dict[str, Any]], ranked: Ranked, conv_ids: Sequence[int]) -> Dict[Any, List[float]]:
    """Mean evidence recall@k per category and over all, for the questions of ``conv_ids``."""
    acc: Dict[Any, List[List[float]]] = defaultdict(lambda: [[] for _ in KS])
    for ci in conv_ids:
        for qi, q in enumerate(convs[ci]["questions"]):
            got = ranked[(ci, qi)]
            for j, k in enumerate(KS):
                r = len(q["evidence"] & set(got[:k])) / len(q["evidence"])
                acc[q["category"]][j].append(r)
                acc["all"][j].append(r)
    return {cat: [float(np.mean(v)) for v in vals] + [len(vals[0])] for cat, vals in acc.items()}


def print_table(name: str, convs: Sequence[Dict[str, Any]], ranked: Ranked) -> Dict[str, Any]:
    halves = {"all": range(len(convs)), "tune": TUNE, "check": [i for i in range(len(convs)) if i not in TUNE]}
    out = {}
    for half, ids in halves.items():
        rows = recall_rows(convs, ranked, list(ids))
        cats = " ".join(f"{CATEGORIES[c][:5]}:{rows[c][1]:.3f}" for c in sorted(k for k in rows if k != "all"))
        a = rows["all"]
        print(f"  {name:28s} {half:5s} (n={a[3]:3d})  R@5 {a[0]:.3f}  R@10 {a[1]:.3f}  R@25 {a[2]:.3f}  | R@10 {cats}")
        out[half] = rows
    return out


# -- the three systems ------------------------------------------------------------------------------------------
def window_ranked(convs: Sequence[Dict[str, Any]]) -> Ranked:
    out: Ranked = {}
    for ci, c in enumerate(convs):
        last = list(range(len(c["units"]) - 1, -1, -1))
        for qi in range(len(c["questions"])):
            out[(ci, qi)] = last
    return out


def hybrid_ranked(convs: Sequence[Dict[str, Any]], client: Any, model: BaseEmbedding,
                  vectors: Dict[str, List[float]]) -> Ranked:
    """One utterance per chunk, package default hybrid retriever, filtered to the conversation."""
    name = "locomo_turns"
    create_collection(client, name, default_spec(384))
    rows = []
    for c in convs:
        for u, own, _ in unit_texts(c["units"], (), RecallRules(context_before=0)):
            rows.append({"id": u.unit_id, "doc_id": u.conversation_id, "text": own, "embedding": vectors[own],
                         "metadata": {"conversation": u.conversation_id, "position": u.position}})
    for i in range(0, len(rows), 256):
        client.insert(name, rows[i:i + 256])
    out: Ranked = {}
    for ci, c in enumerate(convs):
        filters = MetadataFilters(filters=[MetadataFilter(key="conversation", value=f"locomo-{ci}")])
        retriever = MilvusHybridRetriever.from_defaults(collection_name=name, embed_model=model, client=client,
                                                        similarity_top_k=max(KS), filters=filters)
        assert retriever.params.feedback is not None, "the package default (weighted + feedback) was not measured"
        for qi, q in enumerate(c["questions"]):
            nodes = retriever.retrieve(q["question"])
            out[(ci, qi)] = [int(n.node.metadata["position"]) for n in nodes]
    return out


def episodic_ranked(convs: Sequence[Dict[str, Any]], memory: EpisodicMemory, k: int = max(KS),
                    window: int = 0) -> Ranked:
    out: Ranked = {}
    for ci, c in enumerate(convs):
        n = len(c["units"])
        for qi, q in enumerate(c["questions"]):
            got = memory.recall(q["question"], owner=OWNER, conversation_id=f"locomo-{ci}",
                                before=n - window if window else None, k=k)
            assert all(u.found_by or u.spread_from for u in got.units), "a recalled unit without its reasons"
            out[(ci, qi)] = got.positions
    return out


def latency(convs: Sequence[Dict[str, Any]], memories: Sequence[EpisodicMemory], model: BaseEmbedding,
            limit: int) -> List[Tuple[float, float, float]]:
    """p50 and p90 ms of one recall (k=10, window 6) of each memory over the first ``limit`` questions, and the p50
    of this process's CPU ms (every thread), the memories taking turns on each question (side by side under the same
    load)."""
    times: List[List[float]] = [[] for _ in memories]
    cpu: List[List[float]] = [[] for _ in memories]
    for ci, c in enumerate(convs):
        for q in c["questions"][: max(1, limit // len(convs))]:
            model.get_query_embedding(q["question"])  # what the turn's document retrieval did first (cached)
            for i, memory in enumerate(memories):
                t0, c0 = time.perf_counter(), time.process_time()
                memory.recall(q["question"], owner=OWNER, conversation_id=f"locomo-{ci}",
                              before=len(c["units"]) - 6, k=10)
                times[i].append((time.perf_counter() - t0) * 1000)
                cpu[i].append((time.process_time() - c0) * 1000)
    out = []
    for t, spent in zip(times, cpu):
        t.sort()
        out.append((statistics.median(t), t[int(0.9 * (len(t) - 1))], statistics.median(spent)))
    return out


def call_patterns(convs: Sequence[Dict[str, Any]], client: Any, collection: str, model: BaseEmbedding,
                  limit: int) -> None:
    """The Milvus calls of one recall, side by side on the same rows and queries (alternating): this layout's two
    searches (:func:`~llama_index_convrag.memory.episodic_search.search_calls`: ids and scores) and one ``get`` of
    the 3k candidates' fields, against the earlier layout's pattern: one search per list (here each list's kind is a
    filter) and the same ``get``. Wall ms and this process's CPU ms."""
    from llama_index_convrag.memory.episodic_schema import CONTEXT, OUTPUT_FIELDS, OWN
    from llama_index_convrag.memory.episodic_search import position_kind, search_calls, search_expr
    from llama_index_convrag.memory.units import unit_key

    rules = RecallRules()
    wall: Dict[str, List[float]] = {"two searches + get": [], "four searches + get": []}
    cpu: Dict[str, List[float]] = {k: [] for k in wall}
    n = 0
    for ci, c in enumerate(convs):
        for q in c["questions"][: max(1, limit // len(convs))]:
            vector = model.get_query_embedding(q["question"])
            expr = search_expr(OWNER, f"locomo-{ci}", len(c["units"]) - 6)
            calls = search_calls(collection, expr, vector, q["question"], rules)

            def fetch(hits: List[Any]) -> None:
                positions = list(dict.fromkeys(position_kind(str(h["id"]))[0] for h in hits))[:3 * 10]
                client.get(collection, ids=[unit_key(OWNER, f"locomo-{ci}", p) for p in positions],
                           output_fields=list(OUTPUT_FIELDS))

            def two() -> None:
                fetch([h for call in calls for h in client.search(*call.args, **call.kwargs)[0]])

            def four() -> None:
                fetch([h for call in calls for kind in (OWN, CONTEXT)
                       for h in client.search(*call.args, **dict(call.kwargs, limit=rules.depth,
                                                                  filter=f"{expr} and kind == {kind}"))[0]])

            for name, fn in (("two searches + get", two), ("four searches + get", four))[:: 1 if n % 2 == 0 else -1]:
                w0, c0 = time.perf_counter(), time.process_time()
                fn()
                wall[name].append((time.perf_counter() - w0) * 1000)
                cpu[name].append((time.process_time() - c0) * 1000)
            n += 1
    two_p50, four_p50 = statistics.median(wall["two searches + get"]), statistics.median(wall["four searches + get"])
    print(f"Milvus calls of one recall ({n} queries, alternating; load average {os.getloadavg()[0]:.1f}): two "
          f"searches and a get p50 {two_p50:.1f} ms (CPU {statistics.median(cpu['two searches + get']):.1f} ms), "
          f"the earlier pattern (four searches and a get) p50 {four_p50:.1f} ms (CPU "
          f"{statistics.median(cpu['four searches + get']):.1f} ms); ratio {two_p50 / four_p50:.2f}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {list(VARIANTS)}")
    assert not any("," in v for v in VARIANTS), "variant names are split on commas"
    ap.add_argument("--latency-queries", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="the default rules and the one before the second spread, "
                    "100 latency queries, 12 turns per engine")
    ap.add_argument("--turns", type=int, default=30, help="turns per engine in the turn-time comparison")
    args = ap.parse_args(argv)
    names = ["+ vocabulary bridge", DEFAULT] if args.quick else \
        [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; accepted: {list(VARIANTS)}")

    convs = load_locomo()
    n_q = sum(len(c["questions"]) for c in convs)
    print(f"LoCoMo dev: {len(convs)} conversations, {sum(len(c['units']) for c in convs)} utterances, "
          f"{n_q} questions; halves: tune = conversations {list(TUNE)}, check = the rest")
    model = LocalMiniLMEmbedding()
    model.warm_up()
    texts = sorted({t for c in convs for _, own, ctx in unit_texts(c["units"], (), RecallRules())
                    for t in (own, ctx)})
    vectors = dict(zip(texts, cached_embeddings(model, texts, "locomo").tolist()))
    texts_only = dict(vectors)  # before the bridge's words join the table: a fresh memory embeds them
    table = TableEmbedding(vectors, model)
    folder = fresh_dir("memory_recall")
    target = MilvusTarget(uri=str(folder / "memory.db"))
    client = connect_milvus(target)

    print("\nEvidence recall (each question asked at the end of its conversation; k units):")
    results: Dict[str, Any] = {}
    results["window"] = print_table("window (last k)", convs, window_ranked(convs))
    results["hybrid"] = print_table("hybrid per turn", convs, hybrid_ranked(convs, client, model, vectors))
    # One memory indexes (with the default rules, so its word cache is warm as after the writes) and serves the
    # default variant and the latency figures; each other variant reads the same collection.
    default = EpisodicMemory.from_defaults(embed_model=table, client=client, target=target,
                                           collection_name="locomo_memory")
    t0 = time.perf_counter()
    for c in convs:
        default.index(c["units"])
    print(f"  (indexed {sum(len(c['units']) for c in convs)} utterances in {time.perf_counter() - t0:.1f} s, "
          f"embeddings from the table, the bridge's words from the model)")
    for name in names:
        memory = default if name == DEFAULT else EpisodicMemory.from_defaults(
            embed_model=table, client=client, target=target, collection_name="locomo_memory", rules=VARIANTS[name])
        results[name] = print_table(f"episodic {name}", convs, episodic_ranked(convs, memory))
    win = print_table("window 6 + episodic k", convs, merge_window(convs, episodic_ranked(convs, default, window=6), 6))
    results["window 6 + episodic"] = win

    limit = 100 if args.quick else args.latency_queries
    no_bridge = EpisodicMemory.from_defaults(embed_model=table, client=client, target=target,
                                             collection_name="locomo_memory", rules=VARIANTS["+ named speaker"])
    uncached = EpisodicMemory.from_defaults(embed_model=table, client=client, target=target,
                                            collection_name="locomo_memory", cached_rows=0)
    (p50, p90, p_cpu), (n50, n90, _), (u50, u90, u_cpu) = latency(convs, [default, no_bridge, uncached], model, limit)
    cold = TableEmbedding(texts_only, LocalMiniLMEmbedding(query_cache_size=0))
    cold_memory = EpisodicMemory.from_defaults(embed_model=cold, client=client, target=target,
                                               collection_name="locomo_memory")
    [(c50, c90, _)] = latency(convs, [cold_memory], cold, limit)
    print(f"\nRecall latency (k=10, window 6, Milvus Lite, sync, {limit} queries, load average "
          f"{os.getloadavg()[0]:.1f}): query embedding and words cached p50 {p50:.1f} ms p90 {p90:.1f} ms, CPU p50 "
          f"{p_cpu:.1f} ms (in turn with it: without the bridge p50 {n50:.1f} ms p90 {n90:.1f} ms; without the row "
          f"cache p50 {u50:.1f} ms p90 {u90:.1f} ms, CPU p50 {u_cpu:.1f} ms); neither cached (a fresh memory) p50 "
          f"{c50:.1f} ms p90 {c90:.1f} ms")
    call_patterns(convs, client, "locomo_memory", model, limit)
    turn_times(convs[TUNE[-1] + 1], folder, target, model, 12 if args.quick else args.turns)

    block, full = [], []
    for ci, c in enumerate(convs):
        history = count_tokens("\n".join(f"{u.speaker}: {u.text}" for u in c["units"]))
        for q in c["questions"][:40]:
            got = default.recall(q["question"], owner=OWNER, conversation_id=f"locomo-{ci}", k=10)
            block.append(count_tokens(got.block_text()))
            full.append(history)
    print(f"Prompt tokens (cl100k): recalled block k=10 mean {np.mean(block):.0f} (p90 "
          f"{np.percentile(block, 90):.0f}) against the full history mean {np.mean(full):.0f} "
          f"({np.mean(block) / np.mean(full):.1%})")
    salient_worth(convs, default)
    client.drop_collection("locomo_memory")
    client.drop_collection("locomo_turns")
    return 0


def answer_words(text: str) -> set:
    return {stem(w) for w in re.findall(r"[A-Za-z0-9]+", text) if len(w) > 2} - ANSWER_STOP


ANSWER_STOP = {"the", "and", "her", "his", "she", "they", "their", "for", "with", "was", "that", "this", "not",
               "likely", "yes"}


def salient_worth(convs: Sequence[Dict[str, Any]], memory: EpisodicMemory, cap: int = 400) -> None:
    """Answer words (categories 1-4) found in the no-LLM salient summary of everything before the last 6
    utterances (``cap`` tokens) against those in the recalled block (k=10), and per 100 prompt tokens."""
    rows = []
    for ci, c in enumerate(convs):
        older = [u.text for u in c["units"][:-6]]
        summary = salient_summary(older, cap, count_tokens)
        s_words, s_tokens = answer_words(summary), count_tokens(summary)
        for q in c["questions"]:
            want = answer_words(q["answer"])
            if q["category"] == 5 or not want:
                continue
            block = memory.recall(q["question"], owner=OWNER, conversation_id=f"locomo-{ci}",
                                  before=len(c["units"]) - 6, k=10).block_text()
            b_words = answer_words(block)
            rows.append((len(want & s_words) / len(want), s_tokens, len(want & b_words) / len(want),
                         count_tokens(block), len(want & (s_words | b_words)) / len(want)))
    a = np.asarray(rows)
    print(f"\nNo-LLM summary (salient names and numbers, cap {cap}) on {len(rows)} questions (categories 1-4): "
          f"answer words covered {a[:, 0].mean():.3f} in {a[:, 1].mean():.0f} tokens "
          f"({100 * a[:, 0].mean() / a[:, 1].mean():.3f} per 100 tokens); recalled block k=10: "
          f"{a[:, 2].mean():.3f} in {a[:, 3].mean():.0f} tokens ({100 * a[:, 2].mean() / a[:, 3].mean():.3f} per 100); "
          f"both: {a[:, 4].mean():.3f}")


def turn_times(conv: Dict[str, Any], folder: Path, target: MilvusTarget, model: BaseEmbedding, turns: int) -> None:
    """A turn's time with recall on and off, side by side: two engines over one small index, the same user messages
    (the conversation's utterances in order, a fixed scripted answer), turns alternating between them; memory writes
    are waited for after each turn and not timed. The recall's own time is read from each turn's record."""
    essay = (shared_data() / "paul_graham" / "paul_graham_essay.txt").read_text(encoding="utf-8")[:6000]
    index = ConvRAGIndex.from_documents([Document(text=essay, id_="essay")], collection_name="recall_turns",
                                        embed_model=model, target=target)
    llm = ScriptedLLM.from_fn(lambda prompt: "Noted.")
    stores = {name: SQLiteConversationStore(folder / f"chats_{name}.db") for name in ("on", "off")}
    options = {"on": MemoryOptions(summary=SummaryOptions(enabled=False)), "off": MemoryOptions.off()}
    engines = {name: index.as_chat_engine(llm=llm, conversation_store=stores[name], memory=options[name],
                                          rewrite=RewriteOptions(strategy="none")) for name in ("on", "off")}
    lines = [u.text for u in conv["units"]]
    times: Dict[str, List[float]] = {"on": [], "off": []}
    recall_ms: List[float] = []
    window = options["on"].episodic.window
    for t in range(turns):
        for name in ("on", "off") if t % 2 == 0 else ("off", "on"):
            t0 = time.perf_counter()
            response = engines[name].chat(lines[t])
            elapsed = (time.perf_counter() - t0) * 1000
            if name == "on":
                assert engines[name].flush_memory(60), "memory writes did not finish"
            if 2 * t > window + 2:  # earlier messages exist outside the window: the turn recalls
                times[name].append(elapsed)
                if name == "on":
                    recall = response.metadata["turn"].memory["recall"]
                    assert recall is not None and recall["units"], "the memory-on turn recalled nothing"
                    recall_ms.append(recall["latency_ms"])
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"Turn time (default chat mode, scripted LLM, {len(times['on'])} turns each past the window, alternating; "
          f"load average {os.getloadavg()[0]:.1f}): recall on p50 {on:.1f} ms, off p50 {off:.1f} ms, difference "
          f"{on - off:+.1f} ms; the recall itself (turn records) p50 {statistics.median(recall_ms):.1f} ms")


def merge_window(convs: Sequence[Dict[str, Any]], ranked: Ranked, window: int) -> Ranked:
    """What the prompt sees: the last ``window`` utterances first, then the recalled ones (``k`` counts both)."""
    out: Ranked = {}
    for (ci, qi), got in ranked.items():
        n = len(convs[ci]["units"])
        out[(ci, qi)] = list(range(n - 1, n - window - 1, -1)) + got
    return out


if __name__ == "__main__":
    raise SystemExit(main())
