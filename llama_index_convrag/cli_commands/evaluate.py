"""``convrag eval retrieval DATASET`` and ``convrag eval conversation DATASET``.

Both index the data set's documents into their own collection (one row per document, ids = the data set's ids,
see :func:`llama_index_convrag.evaluation.indexing.index_corpus`), reuse it when it already holds as many rows,
run the evaluation module, print a table and write a JSON report and PNG plots into ``--out``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from llama_index_convrag.cli_commands.common import (EXIT_INPUT, EXIT_USAGE, CLIError, Output, check_dimension,
                                                     collection_name_for, connect, embed_model, llm_error,
                                                     resolve_llm)

# name -> retriever kwargs
RETRIEVAL_CONFIGS: Dict[str, Dict[str, Any]] = {
    "dense": {"search_type": "dense"},
    "sparse": {"search_type": "sparse"},
    "hybrid-rrf": {"search_type": "hybrid", "ranker_type": "rrf"},
    "hybrid-weighted": {"search_type": "hybrid", "ranker_type": "weighted"},
}
TABLE_METRICS = ("ndcg@10", "recall@100", "mrr@10")
TOP_K = 100


def parse_configs(text: str) -> List[str]:
    names = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in names if c not in RETRIEVAL_CONFIGS]
    if unknown or not names:
        raise CLIError(EXIT_USAGE, f"--configs must be a comma-separated subset of {list(RETRIEVAL_CONFIGS)}, "
                                   f"got {text!r}")
    return names


def table(rows: Dict[str, Dict[str, Any]], metrics: Tuple[str, ...]) -> str:
    """Fixed-width table: configuration, the metrics, p50 ms."""
    header = ["configuration", *metrics, "p50 ms"]
    lines = [header] + [[name, *(f"{r['metrics'].get(m, float('nan')):.4f}" for m in metrics),
                         f"{r['latency']['p50_ms']:.1f}" if r.get("latency", {}).get("count") else "-"]
                        for name, r in rows.items()]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [" | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
           for line in lines]
    out.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(out)


def _index(corpus: Dict[str, Any], client: Any, target: Any, collection: str, model: Any, out: Output,
           rebuild: bool) -> Tuple[bool, float]:
    from llama_index_convrag.evaluation.indexing import index_corpus

    if not rebuild:
        check_dimension(client, collection, model)
    started = time.perf_counter()
    out.note(f"indexing {len(corpus)} documents into {collection!r} (reused when already complete)")
    try:
        built = index_corpus(corpus, client=client, collection_name=collection, embed_model=model,
                             is_lite=target.is_lite, progress=out.progress, rebuild=rebuild)
    except ValueError as exc:
        raise CLIError(EXIT_INPUT, str(exc)) from exc
    return built, time.perf_counter() - started


def cmd_eval_retrieval(args: Any, out: Output) -> int:
    from llama_index_convrag.evaluation import build_report, evaluate_retriever, load_beir, nodes_to_ranked
    from llama_index_convrag.evaluation import plot_latency_distribution, plot_metric_bars, write_report
    from llama_index_convrag.indices import ConvRAGIndex

    configs = parse_configs(args.configs)
    if args.max_queries is not None and args.max_queries < 1:
        raise CLIError(EXIT_USAGE, f"--max-queries must be >= 1, got {args.max_queries}")
    path = Path(args.dataset)
    if not path.is_dir():
        raise CLIError(EXIT_INPUT, f"BEIR data set folder not found: {str(path)!r} "
                                   f"(expects corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    try:
        data = load_beir(path, args.split)
    except (FileNotFoundError, ValueError) as exc:
        raise CLIError(EXIT_INPUT, str(exc)) from exc
    judged = [q for q in data.queries if any(g > 0 for g in data.qrels.get(q, {}).values())]
    if args.max_queries is not None:
        judged = judged[: args.max_queries]
    if not judged or not data.corpus:
        raise CLIError(EXIT_INPUT, f"data set {str(path)!r} split {args.split!r} has no judged query or no corpus")
    queries = {q: data.queries[q] for q in judged}
    qrels = {q: data.qrels[q] for q in judged}
    target, client = connect(args.uri)
    model = embed_model()
    collection = args.collection if args.collection is not None else collection_name_for(data.name, "beir")
    built, index_s = _index(data.corpus, client, target, collection, model, out, args.rebuild)
    index = ConvRAGIndex.from_collection(collection, embed_model=model, client=client, target=target)
    results: Dict[str, Dict[str, Any]] = {}
    latencies: Dict[str, List[float]] = {}
    # Every configuration pays its own query embedding: without this the first dense run fills the model's
    # query cache and later configurations would look faster than they are.
    cache_size = getattr(model, "query_cache_size", None)
    if cache_size:
        model.query_cache_size = 0
    try:
        for name in configs:
            retriever = index.as_retriever(similarity_top_k=TOP_K, **RETRIEVAL_CONFIGS[name])
            retriever.retrieve(next(iter(queries.values())).text)  # warm-up: load the collection
            out.note(f"running {name} on {len(queries)} queries")
            result = evaluate_retriever(lambda text, r=retriever: nodes_to_ranked(r.retrieve(text)), queries,
                                        qrels, ks=(10, 100), progress=out.progress)
            results[name] = result.to_dict()
            latencies[name] = [v * 1000.0 for v in result.latencies_s.values()]
    finally:
        if cache_size:
            model.query_cache_size = cache_size
    report = build_report("retrieval", config={
        "dataset": str(path.resolve()), "name": data.name, "split": args.split, "queries": len(queries),
        "corpus": len(data.corpus), "collection": collection, "uri": target.uri, "top_k": TOP_K,
        "embedding": getattr(model, "model_name", type(model).__name__), "configs": configs,
        "indexed_now": built, "index_seconds": round(index_s, 2),
        "latency": "per query, wall clock, query embedding included (no query cache)"}, results=results)
    out_dir = Path(args.out)
    stem = f"retrieval_{data.name}_{args.split}"
    report_path = write_report(out_dir / f"{stem}.json", report)
    plot_path = out_dir / f"{stem}.png"
    plot_metric_bars({n: r["metrics"] for n, r in results.items()}, list(TABLE_METRICS), path=plot_path,
                     title=f"{data.name} ({args.split}, {len(queries)} queries, {len(data.corpus)} docs)")
    latency_path = out_dir / f"{stem}_latency.png"
    plot_latency_distribution(latencies, path=latency_path, title=f"{data.name}: latency per query (top-{TOP_K})")
    files = {"report": str(report_path), "plot": str(plot_path), "latency_plot": str(latency_path)}
    if out.json_mode:
        out.json({"table": {n: {**r["metrics"], "p50_ms": r["latency"]["p50_ms"]} for n, r in results.items()},
                  "files": files, "config": report["config"]})
        return 0
    out.text(f"{data.name} ({args.split}): {len(queries)} queries, {len(data.corpus)} documents, "
             f"collection {collection!r} ({'indexed' if built else 'reused'} in {index_s:.1f} s)")
    out.text(table(results, TABLE_METRICS))
    out.text(f"report: {report_path}\nplot:   {plot_path}\nlatency plot: {latency_path}")
    return 0


def _llm_rewrite(llm: Any) -> Any:
    """A replay strategy using the engine's own condense prompt (every turn with history is rewritten)."""
    from llama_index.core.base.llms.types import ChatMessage

    from llama_index_convrag.conversational import QuestionRewriter

    rewriter = QuestionRewriter(strategy="llm", llm=llm, trigger=None)

    def rewrite(history: Any, utterance: str) -> str:
        messages = []
        for turn in history:
            messages.append(ChatMessage(role="user", content=turn.utterance))
            if turn.answer:
                messages.append(ChatMessage(role="assistant", content=turn.answer))
        return rewriter.rewrite(utterance, messages).query

    return rewrite


def cmd_eval_conversation(args: Any, out: Output) -> int:
    from llama_index_convrag.evaluation import (build_report, cast_passage_corpus, concat_history,
                                                contextual_strategy, load_cast_turns, nodes_to_ranked, plot_metric_bars,
                                                plot_turn_curves, replay_conversations, write_report)
    from llama_index_convrag.indices import ConvRAGIndex
    from llama_index_convrag.conversational.retriever import with_depth

    path = Path(args.dataset)
    if path.is_dir():
        path = path / "turns.jsonl"
    if not path.is_file():
        raise CLIError(EXIT_INPUT, f"CAsT turns file not found: {str(path)!r} (give turns.jsonl or its folder)")
    llm = resolve_llm(args.base_url, args.model, args.gguf)
    years = [int(y) for y in args.years.split(",")] if args.years else None
    try:
        dialogues = load_cast_turns(path, years=years)
    except (ValueError, KeyError) as exc:
        raise CLIError(EXIT_INPUT, f"cannot read {str(path)!r} as CAsT turns: {exc}") from exc
    corpus = cast_passage_corpus(dialogues)
    if args.max_dialogues is not None:
        dialogues = dialogues[: args.max_dialogues]
    dialogues = [d for d in dialogues if any(t.relevant for t in d.turns)]
    if not dialogues or not corpus:
        raise CLIError(EXIT_INPUT, f"{str(path)!r} (years {args.years or 'all'}) has no turn with a gold passage "
                                   f"(CAsT 2021 carries them)")
    target, client = connect(args.uri)
    model = embed_model()
    collection = args.collection if args.collection is not None else collection_name_for(path.parent.name, "cast")
    built, index_s = _index(corpus, client, target, collection, model, out, args.rebuild)
    index = ConvRAGIndex.from_collection(collection, embed_model=model, client=client, target=target)
    retriever = index.as_retriever(similarity_top_k=args.top_k, search_type=args.search_type)
    candidates, _ = with_depth(retriever)  # what ConversationalRetriever fuses: FUSION_DEPTH-deep lists
    strategies = {"concat": concat_history(3),
                  "contextual": contextual_strategy(texts={d: doc.text for d, doc in corpus.items()},
                                                    retrieve=lambda q: nodes_to_ranked(candidates.retrieve(q)))}
    if llm is not None:
        strategies["llm"] = _llm_rewrite(llm)
    ks = tuple(sorted({1, args.top_k}))
    try:
        result = replay_conversations(dialogues, lambda q: nodes_to_ranked(retriever.retrieve(q)), strategies,
                                      ks=ks)
    except Exception as exc:
        mapped = llm_error(exc)
        if mapped is not None:
            raise mapped from exc
        raise
    results = result.results_for_report()
    turns = sum(len(s.outcomes) for s in list(result.strategies.values())[:1])
    report = build_report("conversation", config={
        "dataset": str(path.resolve()), "years": years, "dialogues": len(dialogues), "turns": turns,
        "passages": len(corpus), "collection": collection, "search_type": args.search_type, "top_k": args.top_k,
        "strategies": list(result.strategies), "llm": getattr(llm, "model", None)}, results=results)
    out_dir = Path(args.out)
    report_path = write_report(out_dir / "conversation.json", report)
    metrics = (f"ndcg@{args.top_k}", f"recall@{args.top_k}", f"mrr@{args.top_k}")
    plot_path = out_dir / "conversation.png"
    plot_metric_bars({n: s.means for n, s in result.strategies.items()}, list(metrics), path=plot_path,
                     title=f"{path.parent.name}: {len(dialogues)} dialogues, {turns} judged turns")
    turns_path = out_dir / "conversation_turns.png"
    plot_turn_curves(result.per_position(f"ndcg@{args.top_k}"), metric=f"ndcg@{args.top_k}", path=turns_path)
    effects = {n: e.to_dict() for n, e in result.effects.items()}
    summary = result.summary(f"ndcg@{args.top_k}")
    files = {"report": str(report_path), "plot": str(plot_path), "turn_plot": str(turns_path)}
    rows = {n: {"metrics": s.means, "latency": r.get("latency") or {}} for (n, s), r in
            zip(result.strategies.items(), results.values())}
    if out.json_mode:
        out.json({"table": {n: s.means for n, s in result.strategies.items()}, "rewrite_effect": effects,
                  "summary": summary,
                  "files": files, "config": report["config"]})
        return 0
    out.text(f"{len(dialogues)} dialogues, {turns} judged turns, {len(corpus)} passages, collection "
             f"{collection!r} ({'indexed' if built else 'reused'} in {index_s:.1f} s)")
    out.text(table(rows, metrics))
    for name, e in effects.items():
        out.text(f"{name}: changed {e['changed']}/{e['turns']} turns, {e['improved']} improved, "
                 f"{e['worsened']} worsened, mean delta nDCG@{e['k']} {e['mean_delta_ndcg']:+.3f}")
    for name, row in summary.items():
        gap = f"{100 * row['gap_closed']:.0f}%" if "gap_closed" in row else "-"
        out.text(f"{name}: raw->manual gap closed {gap}, follow-ups worse than raw {row['worse']}/{row['followups']}, "
                 f"better {row['better']}")
    out.text(f"report: {report_path}\nplot:   {plot_path}\nturn plot: {turns_path}")
    return 0
