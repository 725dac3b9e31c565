"""Every LLM-facing path on a real model: Qwen2.5-Coder-0.5B-Instruct (GGUF) behind llama.cpp's OpenAI server.

A 0.5B model is a floor, not what users of larger models get: these numbers say what survives a weak model.

Sections (each bounded by a sample size, all against one server started here, greedy decoding):

1. ``rewrite``: CAsT 2021 (the first dialogues up to ``--turns`` judged turns; corpus = every 2021 gold passage; the
   rewriter sees the earlier utterances: the canonical passages would make each condense prompt ~1,000 tokens,
   minutes per call on a loaded 2-core machine) and CANARD dev (the rewriter sees earlier questions and answers;
   corpus = every QuAC answer span of the 490 dialogues; a turn's own answer span is its relevant document: a
   proxy, CANARD has no passages). Strategies ``raw``, ``concat`` (last 3 utterances), ``contextual`` (the
   LLM-free default: salient history terms, both lists fused with the weight read off the question's own results,
   as ``convrag eval conversation`` scores it), ``llm``
   (the engine's condense rewrite, every turn with history) and ``manual`` (human rewrites), all on the same turns;
   hybrid retrieval top 10; hit@5, nDCG@10, token F1 against the human rewrite, the share of the raw -> human
   nDCG@10 gap closed and the follow-ups made worse than raw; usable-rewrite rate (LLM replies kept after cleaning)
   and the share that needed cleaning.
2. ``rgb``: RGB ``en_fact`` / ``zh_fact`` (first ``--rgb`` questions each; context = a positive passage, then a
   negative one): answer accuracy (gold contained) and token F1 per response mode, the no-LLM ``extractive`` mode when
   registered, structured answer filtering (tool calls and text JSON: parse rate = replies parsed / calls),
   citation-marker validity (markers in 1..n / all markers).
3. ``rerank``: LLM rerank listwise and pointwise on the same RGB questions (2 positive, 2 negative passages):
   parse rate and how often the top-scored passage is a positive.
4. ``latency``: streamed chat turns through the engine on the CAsT collection (3-turn conversations): rewrite time,
   time to first token and total time per turn (medians).

Setup once: ``python -m llama_index_convrag.testing.real_llm setup``.
Run: ``PYTHONPATH=. python bench/real_llm.py [--turns 20] [--rgb 3] [--sections rewrite,rgb,rerank,latency]``
(about 45 minutes on a loaded 2-core machine: 10-20 s per call).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import NodeWithScore, TextNode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import OUT, shared_data  # noqa: E402

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine  # noqa: E402
from llama_index_convrag.conversational import QuestionRewriter  # noqa: E402
from llama_index_convrag.config import OpenAICompatible  # noqa: E402
from llama_index_convrag.evaluation import (cast_passage_corpus, concat_history, contextual_strategy,  # noqa: E402
                                            load_cast_turns, nodes_to_ranked, replay_conversations)
from llama_index_convrag.evaluation.answers import token_f1  # noqa: E402
from llama_index_convrag.evaluation.datasets import Dialogue, Document, load_canard  # noqa: E402
from llama_index_convrag.postprocessors.scorers.base import ScorerError  # noqa: E402
from llama_index_convrag.postprocessors.scorers.llm import LLMScorer, parse_pointwise  # noqa: E402
from llama_index_convrag.synthesizers import get_response_synthesizer  # noqa: E402
from llama_index_convrag.synthesizers.citations import parse_markers  # noqa: E402
from llama_index_convrag.synthesizers.registry import lookup_mode, registered_modes  # noqa: E402
from llama_index_convrag.testing.real_llm import locate, start_server  # noqa: E402

log = logging.getLogger("bench.real_llm")
SECTIONS = ("rewrite", "rgb", "rerank", "latency")
#: Milvus Lite refuses a file name of 36 characters or more.
LITE_NAME_LIMIT = 36


def lite_file_name(sections: Sequence[str]) -> str:
    """The Milvus Lite file of a section set, one per set (Milvus Lite opens a file from one process at a time):
    ``real_llm_`` and the sections' positions in :data:`SECTIONS` (``real_llm_0123.db`` for all four), short of
    Milvus Lite's name limit."""
    name = "real_llm_" + "".join(str(SECTIONS.index(s)) for s in SECTIONS if s in sections) + ".db"
    assert len(name) < LITE_NAME_LIMIT, name
    return name


# --- data ----------------------------------------------------------------------------------------------------------
def first_dialogues(dialogues: Sequence[Dialogue], turns: int) -> List[Dialogue]:
    """Leading dialogues until they hold at least ``turns`` judged turns."""
    out, count = [], 0
    for d in dialogues:
        if count >= turns:
            break
        judged = sum(1 for t in d.turns if t.relevant)
        if judged:
            out.append(d)
            count += judged
    return out


def cast21(turns: int) -> Tuple[List[Dialogue], Dict[str, Document]]:
    dialogues = [d for d in load_cast_turns(shared_data() / "trec_cast" / "turns.jsonl", years=[2021])]
    return first_dialogues(dialogues, turns), cast_passage_corpus(dialogues)


def canard(turns: int) -> Tuple[List[Dialogue], Dict[str, Document]]:
    """CANARD with each turn's QuAC answer span as its relevant document (all answer spans form the corpus)."""
    dialogues = load_canard(shared_data() / "canard" / "dialogues_dev.jsonl")
    corpus = {t.turn_id: Document(doc_id=t.turn_id, text=t.answer) for d in dialogues for t in d.turns if t.answer}
    judged = [dataclasses.replace(d, turns=tuple(dataclasses.replace(t, relevant={t.turn_id: 1} if t.answer else {})
                                                 for t in d.turns)) for d in dialogues]
    return first_dialogues(judged, turns), corpus


# --- 1. rewrite ----------------------------------------------------------------------------------------------------
class LLMRewrite:
    """A replay strategy around the engine's QuestionRewriter that keeps every RewriteResult."""

    def __init__(self, llm: Any) -> None:
        self.rewriter = QuestionRewriter(llm=llm, trigger=None)
        self.results: List[Any] = []

    def __call__(self, history: Sequence[Any], utterance: str) -> str:
        messages = []
        for turn in history:
            messages.append(ChatMessage(role="user", content=turn.utterance))
            if turn.answer:
                messages.append(ChatMessage(role="assistant", content=turn.answer))
        result = self.rewriter.rewrite(utterance, messages)
        self.results.append(result)
        return result.query


def retriever_for(name: str, corpus: Dict[str, Document], embed: Any, client: Any, target: Any
                  ) -> Tuple[Callable, Callable]:
    """The top-10 search every strategy is scored on, and the 50-deep one ``contextual`` fuses (as the product)."""
    from llama_index_convrag.evaluation.indexing import index_corpus
    from llama_index_convrag.indices import ConvRAGIndex
    from llama_index_convrag.conversational.retriever import with_depth

    index_corpus(corpus, client=client, collection_name=name, embed_model=embed, is_lite=True)
    retriever = ConvRAGIndex.from_collection(name, embed_model=embed, client=client, target=target).as_retriever(
        similarity_top_k=10)
    deep, _ = with_depth(retriever)
    return lambda q: nodes_to_ranked(retriever.retrieve(q)), lambda q: nodes_to_ranked(deep.retrieve(q))


def bench_rewrite(llm: Any, turns: int, embed: Any, client: Any, target: Any) -> List[Dict[str, Any]]:
    rows = []
    for name, loader in (("CAsT 2021", cast21), ("CANARD", canard)):
        dialogues, corpus = loader(turns)
        retrieve, deep = retriever_for(f"real_llm_{name.split()[0].lower()}", corpus, embed, client, target)
        llm_rewrite = LLMRewrite(llm)
        started = time.perf_counter()
        strategies = {"concat": concat_history(3), "llm": llm_rewrite,
                      "contextual": contextual_strategy(texts={d: doc.text for d, doc in corpus.items()},
                                                        retrieve=deep)}
        result = replay_conversations(dialogues, retrieve, strategies, ks=(5, 10), metrics=("ndcg", "hit_rate"))
        summary = result.summary("ndcg@10")
        called = [r for r in llm_rewrite.results if r.used_llm]
        usable = [r for r in called if r.fallback_reason is None]
        judged = len(next(iter(result.strategies.values())).outcomes)
        log.info("%s: %d turns, %d LLM rewrites in %.0f s", name, judged, len(called), time.perf_counter() - started)
        for strategy, scored in result.strategies.items():
            means = scored.means
            row = {"dataset": name, "strategy": strategy, "turns": judged, "hit@5": means["hit_rate@5"],
                   "ndcg@10": means["ndcg@10"], "rewrite_f1": means.get("rewrite_f1"),
                   "gap_closed": summary[strategy].get("gap_closed"), "worse": summary[strategy]["worse"],
                   "followups": summary[strategy]["followups"]}
            if strategy == "llm":
                row.update(llm_calls=len(called), usable=len(usable) / max(1, len(called)),
                           cleaned=sum(1 for r in usable if set(r.cleaning) - {"unchanged"}) / max(1, len(called)),
                           unchanged=sum(1 for r in usable if "unchanged" in r.cleaning) / max(1, len(called)),
                           fallbacks=[r.fallback_reason for r in called if r.fallback_reason][:5],
                           rewrite_s=statistics.median(r.latency_ms for r in called) / 1000 if called else None)
            rows.append(row)
    return rows


# --- 2. RGB answers -------------------------------------------------------------------------------------------------
def rgb_items(lang: str, n: int) -> List[Dict[str, Any]]:
    with open(shared_data() / "rgb" / f"{lang}_fact.json", encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    return [i for i in items if len(i["positive"]) >= 2 and len(i["negative"]) >= 2][:n]


def golds(item: Dict[str, Any]) -> List[str]:
    answer = item["answer"]
    flat = answer if isinstance(answer, list) else [answer]
    return [str(a) for group in flat for a in (group if isinstance(group, list) else [group])]


def contains_gold(text: str, item: Dict[str, Any]) -> bool:
    return any(g.lower() in text.lower() for g in golds(item))


def context_nodes(item: Dict[str, Any]) -> List[NodeWithScore]:
    texts = [item["positive"][0], item["negative"][0]]
    return [NodeWithScore(node=TextNode(text=t, id_=f"p{i}"), score=1.0 - i / 10) for i, t in enumerate(texts)]


def synth_modes(embed: Any) -> List[Tuple[str, Callable[[Any], Any]]]:
    """(label, llm -> synthesizer) for every registered mode that writes text, plus the filtering/citation runs."""
    out: List[Tuple[str, Callable[[Any], Any]]] = []
    for mode in registered_modes():
        cls = lookup_mode(mode)
        if mode in ("no_text", "context_only"):
            continue
        if not cls.requires_llm:
            out.append((f"{mode} (no LLM)", lambda llm, mode=mode: extractive_synth(mode, embed)))
            continue
        out.append((mode, lambda llm, mode=mode: get_response_synthesizer(llm=llm, response_mode=mode)))
    return out


def extractive_synth(mode: str, embed: Any) -> Any:
    try:
        return get_response_synthesizer(response_mode=mode, embed_model=embed)  # type: ignore[call-arg]
    except TypeError:
        return get_response_synthesizer(response_mode=mode)


def bench_rgb(server: Any, n: int, embed: Any) -> Dict[str, Any]:
    """Item-major (every mode on one question before the next), so llama.cpp reuses the shared prompt prefix."""
    llm = OpenAICompatible(**server.client_kwargs(max_tokens=200))
    text_json_llm = OpenAICompatible(**server.client_kwargs(max_tokens=200, function_calling=False))
    runs: List[Tuple[str, Any]] = [(label, build(llm)) for label, build in synth_modes(embed)]
    runs += [
        ("refine + filtering (tool calls)", get_response_synthesizer(
            llm=llm, response_mode="refine", structured_answer_filtering=True)),
        ("refine + filtering (text JSON)", get_response_synthesizer(
            llm=text_json_llm, response_mode="refine", structured_answer_filtering=True)),
        ("compact + citations", get_response_synthesizer(llm=llm, response_mode="compact", citations=True)),
    ]
    stats: Dict[str, Dict[str, Any]] = {label: {"calls": 0, "skipped": 0, "markers": 0, "valid": 0, "seconds": [],
                                                "en": [], "zh": []} for label, _ in runs}
    for lang in ("en", "zh"):
        for item in rgb_items(lang, n):
            nodes = context_nodes(item)
            for label, synth in runs:
                st = stats[label]
                started = time.perf_counter()
                try:
                    response = synth.synthesize(item["query"], nodes)
                    text = response.response or ""
                except Exception as exc:  # noqa: BLE001 - a failing mode is a result, counted as wrong
                    log.warning("%s failed on %s %s: %s", label, lang, item["id"], exc)
                    text, response = "", None
                st["seconds"].append(time.perf_counter() - started)
                st[lang].append((contains_gold(text, item), max(token_f1(text, g) for g in golds(item))))
                if response is not None:
                    st["calls"] += response.metadata.get("llm_calls", 0)
                    st["skipped"] += len(response.metadata.get("skipped_chunks", []))
                    found = parse_markers(text)
                    st["markers"] += len(found)
                    st["valid"] += sum(1 for m in found if 1 <= m <= len(nodes))
                log.info("rgb %s %s %s: %.1f s %r", lang, item["id"], label, st["seconds"][-1], text[:120])
    rows = []
    for label, _ in runs:
        st = stats[label]
        row: Dict[str, Any] = {"mode": label, "s_per_answer": statistics.median(st["seconds"])}
        for lang in ("en", "zh"):
            row[f"{lang}_acc"] = sum(a for a, _ in st[lang]) / len(st[lang])
            row[f"{lang}_f1"] = sum(f for _, f in st[lang]) / len(st[lang])
        if "filtering" in label:
            row["parse_rate"] = 1 - st["skipped"] / max(1, st["calls"])
        if "citations" in label:
            row["marker_validity"] = st["valid"] / st["markers"] if st["markers"] else None
            row["markers"] = st["markers"]
        rows.append(row)
    return {"questions_per_language": n, "rows": rows}


# --- 3. rerank ------------------------------------------------------------------------------------------------------
def bench_rerank(llm: Any, n: int) -> List[Dict[str, Any]]:
    rows = []
    for mode in ("listwise", "pointwise"):
        scorer = LLMScorer(llm, mode=mode)
        parsed = total = top_positive = 0
        for lang in ("en", "zh"):
            for item in rgb_items(lang, n):
                texts = [item["negative"][0], item["positive"][0], item["negative"][1], item["positive"][1]]
                if mode == "pointwise":
                    replies = [llm.predict(scorer.pointwise_prompt, **scorer._pointwise_kwargs(item["query"], t))
                               for t in texts]
                    ratings = [parse_pointwise(r, scorer.max_relevance) for r in replies]
                    parsed += sum(r is not None for r in ratings)
                    total += len(replies)
                    scores = [0.0 if r is None else r for r in ratings]
                else:
                    total += 1
                    try:
                        scores = scorer.score(item["query"], texts)
                        parsed += 1
                    except ScorerError as exc:
                        log.warning("listwise reply not parsed: %s", exc)
                        scores = [0.0] * len(texts)
                top_positive += max(range(len(texts)), key=scores.__getitem__) in (1, 3) and max(scores) > 0
        questions = 2 * n
        rows.append({"mode": mode, "parse_rate": parsed / total, "top1_positive": top_positive / questions,
                     "questions": questions})
        log.info("rerank %s: %s", mode, rows[-1])
    return rows


# --- 4. latency -----------------------------------------------------------------------------------------------------
def bench_latency(llm: Any, embed: Any, client: Any, target: Any, conversations: int = 2) -> Dict[str, Any]:
    from llama_index_convrag.indices import ConvRAGIndex

    dialogues, corpus = cast21(60)
    retriever_for("real_llm_cast", corpus, embed, client, target)
    index = ConvRAGIndex.from_collection("real_llm_cast", embed_model=embed, client=client, target=target)
    ttft, total, rewrite = [], [], []
    for dialogue in dialogues[:conversations]:
        engine = ConvRAGChatEngine.from_defaults(index.as_retriever(similarity_top_k=3), llm,
                                                 answer=AnswerOptions(response_mode="compact", citations=False))
        for turn in dialogue.turns[:3]:
            started = time.perf_counter()
            response = engine.stream_chat(turn.utterance)
            first = None
            for _ in response.response_gen:
                if first is None:
                    first = time.perf_counter() - started
            total.append(time.perf_counter() - started)
            ttft.append(first if first is not None else total[-1])
            record = engine.store.get_turn_record(response.message_id)
            if record["rewrite_used_llm"]:
                rewrite.append(record["rewrite_latency_ms"] / 1000)
    return {"turns": len(total), "ttft_s": statistics.median(ttft), "total_s": statistics.median(total),
            "rewrite_s": statistics.median(rewrite) if rewrite else None, "rewrites": len(rewrite)}


# --- report ---------------------------------------------------------------------------------------------------------
def fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def print_tables(report: Dict[str, Any]) -> None:
    print(f"\nmodel {report['model']}, llama-cpp-python {report['runtime']}, server start {report['startup_s']:.1f} s")
    if "rewrite" in report:
        print("\n| data set | strategy | turns | hit@5 | nDCG@10 | gap closed | follow-ups worse than raw | "
              "F1 vs human | usable LLM rewrites | of which unchanged | needed cleaning |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in report["rewrite"]:
            gap = "-" if r["gap_closed"] is None or r["strategy"] in ("raw", "manual") else f"{r['gap_closed']:.0%}"
            print(f"| {r['dataset']} | {r['strategy']} | {r['turns']} | {fmt(r['hit@5'])} | {fmt(r['ndcg@10'])} | "
                  f"{gap} | {r['worse']}/{r['followups']} | {fmt(r['rewrite_f1'])} | {fmt(r.get('usable'))} | "
                  f"{fmt(r.get('unchanged'))} | {fmt(r.get('cleaned'))} |")
    if "rgb" in report:
        n = report["rgb"]["questions_per_language"]
        print(f"\n| response mode (RGB, {n} en + {n} zh) | en acc | en F1 | zh acc | zh F1 | s/answer | parse rate | "
              "marker validity |")
        print("|---|---|---|---|---|---|---|---|")
        for r in report["rgb"]["rows"]:
            print(f"| {r['mode']} | {fmt(r['en_acc'])} | {fmt(r['en_f1'])} | {fmt(r['zh_acc'])} | {fmt(r['zh_f1'])} | "
                  f"{fmt(r['s_per_answer'])} | {fmt(r.get('parse_rate'))} | {fmt(r.get('marker_validity'))} |")
    if "rerank" in report:
        print("\n| LLM rerank | questions | parse rate | top-1 is a positive |\n|---|---|---|---|")
        for r in report["rerank"]:
            print(f"| {r['mode']} | {r['questions']} | {fmt(r['parse_rate'])} | {fmt(r['top1_positive'])} |")
    if "latency" in report:
        lat = report["latency"]
        print(f"\nstreamed chat turns: {lat['turns']}; median time to first token {lat['ttft_s']:.2f} s, total "
              f"{lat['total_s']:.2f} s per turn, condense rewrite {fmt(lat['rewrite_s'])} s ({lat['rewrites']} calls)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="judged turns per rewrite data set (default 20)")
    parser.add_argument("--rgb", type=int, default=3, help="RGB questions per language (default 3)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of {list(SECTIONS)}")
    parser.add_argument("--n-threads", type=int, default=None, help="llama.cpp threads (default: the server's)")
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections must be among {list(SECTIONS)}, got {unknown}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
    from llama_index_convrag.milvus import MilvusTarget, connect_milvus

    setup = locate()
    OUT.mkdir(exist_ok=True)
    client = target = None
    if {"rewrite", "latency"} & set(sections):  # Milvus first: it starts slowly on a loaded machine
        # one Milvus Lite file per section set: Milvus Lite opens a file from one process at a time
        target = MilvusTarget(uri=str(OUT / lite_file_name(sections)))
        client = connect_milvus(target)
    embed = LocalMiniLMEmbedding()
    embed.warm_up()
    server = start_server(setup, n_threads=args.n_threads, log_path=OUT / f"real_llm_server_{'_'.join(sections)}.log")
    runtime = (setup.python.parent.parent / "llama_cpp_server.ok").read_text().strip()
    report: Dict[str, Any] = {"model": "qwen2.5-coder-0.5b-instruct (GGUF)", "runtime": runtime,
                              "startup_s": server.startup_seconds, f"args_{'+'.join(sections)}": vars(args)}
    try:
        llm = OpenAICompatible(**server.client_kwargs(max_tokens=256))
        if "rewrite" in sections:
            report["rewrite"] = bench_rewrite(llm, args.turns, embed, client, target)
        if "rgb" in sections:
            report["rgb"] = bench_rgb(server, args.rgb, embed)
        if "rerank" in sections:
            report["rerank"] = bench_rerank(llm, args.rgb)
        if "latency" in sections:
            report["latency"] = bench_latency(llm, embed, client, target)
    finally:
        server.stop()
    path = OUT / "real_llm.json"  # sections of separate runs merge
    merged = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    merged.update(report)
    path.write_text(json.dumps(merged, indent=1, ensure_ascii=False), encoding="utf-8")
    print_tables(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
