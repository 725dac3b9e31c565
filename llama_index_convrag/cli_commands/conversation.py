"""``convrag ingest``, ``convrag ask`` and ``convrag chat``.

Every turn goes through ``ConvRAGIndex.as_chat_engine`` (our chat engine: rewrite, retrieval, cited answer, the
turn persisted in the conversation store); this module only prints it. With an LLM configured the rewrite and the
answer use it; without one the turn is retrieval-only: the no-LLM ``contextual`` rewrite (salient history terms, the
follow-up's own results fused with the expanded query's; ``--json`` carries why each term was added) and an
extractive answer (the retrieved sentences closest to the question, cited), with the passages shown as its sources.

A turn whose LLM fails (HTTP error, timeout, a server that dies mid-stream) or whose answer is not complete (cut at
the output limit, empty) is stored as ``error`` with its question and partial text, said on stderr, and makes the
command exit 5; ``chat`` goes on with the next question. A reranker that failed is said too, and the scores line
then describes the retrieval scores the passages kept.
"""

from __future__ import annotations

import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

from llama_index_convrag.cli_commands.common import (EXIT_LLM, EXIT_USAGE, CLIError, Output, check_dimension, check_question,
                                                     connect,
                                                     default_store_path, embed_model, llm_error, require_collection,
                                                     resolve_llm)
from llama_index_convrag.cli_commands.conversations import open_store, require_conversation
from llama_index_convrag.cli_commands.conversations import store_path as store_path_for
from llama_index_convrag.cli_commands.engine_options import (check_llm_needs, engine_kwargs, limit_kwargs,
                                                             retriever_kwargs)
from llama_index_convrag.cli_commands.ingest import not_ingested_notes, run_ingest
from llama_index_convrag.conversational.retriever import FUSION_DEPTH

SNIPPET_CHARS = 240
RETRIEVAL_ONLY = "retrieval-only"


# --- one turn, with or without an LLM ----------------------------------------------------------------------
def _node_info(marker: int, nws: Any) -> Dict[str, Any]:
    node = nws.node
    meta = node.metadata
    source = meta.get("file_path") or meta.get("file_name") or node.ref_doc_id or node.node_id
    text = " ".join(node.get_content().split())
    return {"marker": marker, "source": str(source), "file": meta.get("file_name", Path(str(source)).name),
            "chunk": meta.get("chunk"), "score": nws.score, "node_id": node.node_id,
            "text": text[:SNIPPET_CHARS] + ("..." if len(text) > SNIPPET_CHARS else "")}


def one_line(text: str) -> str:
    """A multi-line retrieval query (the concat rewrite joins turns with newlines) shown on one line."""
    return " / ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _sources(citations: Iterable[Dict[str, Any]]) -> List[str]:
    seen: Dict[str, None] = {}
    for c in citations:
        seen.setdefault(c["source"])
    return list(seen)


#: What a passage's score means, by (search type, hybrid ranker); printed under the passages and in --json.
SCORE_MEANINGS = {
    ("dense", None): "cosine similarity of query and passage (-1 to 1, higher is closer)",
    ("sparse", None): "BM25 (unbounded, depends on the query's words: compare within one list only)",
    ("hybrid", "rrf"): "reciprocal rank fusion of the dense and BM25 lists, sum of 1/(60 + rank): only the order "
                       "means something",
    ("hybrid", "weighted"): "weighted mean of the dense, dense-feedback and BM25 scores (0.25/0.25/0.5), each "
                            "min-max normalised per query: 1.0 is the best passage of this query, not a perfect match",
}
#: ``--no-feedback``: weighted fusion of the two first-round lists only.
WEIGHTED_WITHOUT_FEEDBACK = ("weighted mean of the dense and BM25 scores (0.5/0.5), each min-max normalised per query: "
                             "1.0 is the best passage of this query, not a perfect match")


#: What a passage's score means after ``--rerank``, by scorer.
RERANK_MEANINGS = {
    "embedding": "reranker: best cosine similarity of the question and a window of the passage (-1 to 1)",
    "llm": "reranker: the LLM's relevance grade, listed order breaking ties (only the order means something)",
}


#: How every scores line starts; what follows says what the number after ``[n]`` means.
SCORES_PREFIX = "[n] is the rank; score = "


def score_meaning(search_type: str, ranker: Optional[str], rerank: Optional[str] = None, feedback: bool = True) -> str:
    """``[n]`` is the rank; the rest says what the number after it means for this retrieval setting."""
    if rerank is not None:
        return SCORES_PREFIX + RERANK_MEANINGS[rerank]
    key = (search_type, ranker if search_type == "hybrid" else None)
    if key == ("hybrid", "weighted") and not feedback:
        return SCORES_PREFIX + WEIGHTED_WITHOUT_FEEDBACK
    return SCORES_PREFIX + SCORE_MEANINGS.get(key, "the retriever score")


def fused_meaning(scores: str, fusion: Dict[str, Any]) -> str:
    """``scores`` for a follow-up whose two searches were fused (``rewrite_explanation["fusion"]``): the number is
    the weighted sum of the two lists' min-max normalised scores divided by the sum of the two weights, 0 to 1, as a
    plain search's (``conversational/retriever.py:fuse_ranked``)."""
    own, ctx = float(fusion["question"]), float(fusion["context"])
    meaning = scores.removeprefix(SCORES_PREFIX)
    agreed = fusion.get("agreement")
    why = "" if agreed is None else (f"; the expanded list weighs less the more the two lists' first results agree "
                                     f"beyond chance (here {float(agreed):.2f}; 0.65 or more: weight 0)")
    return (f"{SCORES_PREFIX}({own:.3g} x the question's own list + {ctx:.3g} x the history-expanded "
            f"query's list) / {own + ctx:.3g}, each list min-max normalised over its top {FUSION_DEPTH} (0 to 1: 1.0 is "
            f"the best of both lists, not a perfect match){why}; within each list: {meaning}")


#: Said after the scores line's meaning when the reranker failed and the passages kept their retrieval scores.
RERANK_FAILED = " (the reranker failed, so these are the retrieval scores in retrieval order)"


def llm_failure(exc: BaseException, timeout: Optional[float]) -> Optional[CLIError]:
    """An exit-5 error for an LLM failure during a turn: the OpenAI client's (``common.llm_error``), a timeout
    naming the limit, or a connection the server dropped mid-answer (httpx errors a stream raises unwrapped)."""
    try:
        import httpx
        import openai
    except ImportError:  # pragma: no cover - both come with llama-index-llms-openai
        return llm_error(exc)
    limit = "" if timeout is None else f" (timeout {timeout:g} s; raise it with --llm-timeout or CONVRAG_LLM_TIMEOUT)"
    seen: Optional[BaseException] = exc
    while seen is not None:
        if isinstance(seen, (openai.APITimeoutError, httpx.TimeoutException)):
            return CLIError(EXIT_LLM, f"the LLM server did not answer in time{limit}: {type(seen).__name__}")
        if isinstance(seen, httpx.TransportError):
            return CLIError(EXIT_LLM, f"the LLM server closed the connection mid-answer (the partial answer is "
                                      f"stored as 'error'): {type(seen).__name__}: {seen}")
        seen = seen.__cause__ if seen.__cause__ is not None else seen.__context__
    return llm_error(exc)


class EngineSession:
    """Our chat engine from ``index.as_chat_engine``; ``mode`` is ``llm`` or ``retrieval-only`` (streams when asked).
    ``scores`` explains a plain turn's scores, ``fused_scores`` those inside each list of a fused follow-up (whose
    two searches skip the dense feedback round: ``retrievers.conversational.with_depth``)."""

    def __init__(self, engine: Any, mode: str, scores: str = "", fused_scores: str = "",
                 filters: Sequence[str] = (), retrieval_scores: str = "", timeout: Optional[float] = None) -> None:
        self.engine = engine
        self.filters = list(filters)
        self.mode = mode
        self.scores = scores
        self.fused_scores = fused_scores
        self.retrieval_scores = retrieval_scores if retrieval_scores else scores
        self.timeout = timeout
        self.limits: Optional[Dict[str, Any]] = None  # the LLM's limits and where they came from (--json)

    @property
    def conversation_id(self) -> str:
        return self.engine.conversation_id

    def reset(self) -> None:
        self.engine.reset()

    def _scores(self, explanation: Optional[Dict[str, Any]], rerank_failed: bool = False) -> str:
        if rerank_failed:
            return self.retrieval_scores + RERANK_FAILED
        fusion = explanation.get("fusion") if explanation is not None else None
        if fusion is None or not self.fused_scores:
            return self.scores
        return fused_meaning(self.fused_scores, fusion)

    def turn(self, question: str, out: Output, stream: bool = False) -> Dict[str, Any]:
        started = time.perf_counter()
        try:
            if stream and not out.json_mode:
                response = self.engine.stream_chat(question)
                out.text(f"query> {one_line(response.metadata['turn'].retrieval_query)}")
                out.text("answer> ", end="")
                for delta in response.response_gen:
                    if response.source_nodes:
                        out.text(delta, end="")
                out.text("" if response.source_nodes else no_passage_answer(self.filters))
                answer, meta = response.response, response.metadata
            else:
                response = self.engine.chat(question)
                answer, meta = response.response, response.metadata
        except Exception as exc:
            if stream and not out.json_mode:
                out.text()  # end the partial answer's line
            mapped = llm_failure(exc, self.timeout)
            if mapped is not None:
                raise mapped from exc
            raise
        citations = [_node_info(i, n) for i, n in enumerate(response.source_nodes, start=1)]
        record = meta["turn"]
        markers = {c["source_index"]: c["marker"] for c in record.citations}
        for i, c in enumerate(citations):
            c["cited_as"] = markers.get(i)
        rewrite = record.rewrite_strategy if record.rewrite_skipped_reason is None else \
            f"none ({record.rewrite_skipped_reason})"
        return {"conversation_id": meta["conversation_id"], "message_id": meta["message_id"], "question": question,
                "retrieval_query": record.retrieval_query, "rewrite": rewrite,
                "rewrite_explanation": record.rewrite_explanation,
                "answer": answer if citations else no_passage_answer(self.filters),
                "citations": citations, "sources": _sources(citations), "streamed": stream and not out.json_mode,
                "scores": self._scores(record.rewrite_explanation, any(w.startswith("rerank failed")
                                                                       for w in record.warnings)),
                "seconds": round(time.perf_counter() - started, 3), "rewrite_ms": round(record.rewrite_latency_ms, 1),
                "status": record.status, "error": record.error, "warnings": list(record.warnings),
                "answer_source": record.answer_source, "answer_completion": record.answer_completion,
                "unsupported": (record.grounding or {}).get("unsupported", [])}


def no_passage_answer(filters: Sequence[str]) -> str:
    """What a turn without any retrieved passage answers (instead of "Empty Response")."""
    if filters:
        return f"no passage matched the filter ({' and '.join(filters)}); nothing to answer from"
    return "no passage matched the question; nothing to answer from"


#: The note under an answer the engine showed instead of the model's empty, marker-only or echoing one
#: (``answer_source``).
RECOVERED_NOTES = {
    "llm_retry_without_citations": "(the model gave no answer text, or only citation markers; shown: its answer when "
                                   "asked without citations, cited by matching its sentences to the passages)",
    "extractive_fallback": "(the model gave no answer text, only citation markers or the question restated; shown: "
                           "the passages' sentences closest to the question)",
}


def print_turn(turn: Dict[str, Any], out: Output, mode: str) -> None:
    for warning in turn.get("warnings") or ():
        out.stderr.write(f"convrag: warning: {warning}\n")
    if turn.get("status") == "error":
        out.stderr.write(f"convrag: error: the answer is not complete (stored as 'error' with its text): "
                         f"{turn.get('error')}\n")
    if out.json_mode:
        return
    if not turn.get("streamed"):
        out.text(f"query> {one_line(turn['retrieval_query'])}")
        out.text(f"answer> {turn['answer']}")
    if turn.get("answer_source") in RECOVERED_NOTES:
        out.text(RECOVERED_NOTES[turn["answer_source"]])
    if turn.get("answer_completion"):
        done = turn["answer_completion"]
        out.text(f"(the model wrote {done['answer']!r}; shown as passage [{done['passage']}] writes it)")
    for u in turn.get("unsupported") or ():
        out.text(f"(!) in no passage: {u['text']}")
    if mode == RETRIEVAL_ONLY:
        out.text("(retrieval only: extractive answer, no LLM configured; set OPENAI_API_KEY or --base-url for "
                 "generated answers)")
    if not turn["citations"]:
        out.text("no passages found")
    for c in turn["citations"]:
        score = f"{c['score']:.4f}" if c["score"] is not None else "-"
        cited = " (cited)" if c.get("cited_as") is not None else ""
        out.text(f"[{c['marker']}] {c['file']}:{c['chunk']} {score}{cited}")
    if turn["citations"] and turn.get("scores"):
        out.text(f"scores: {turn['scores']}")
    out.text("sources: " + (", ".join(turn["sources"]) if turn["sources"] else "-"))
    out.text()


# --- session building ------------------------------------------------------------------------------------
def _session(args: Any, out: Output, path: Optional[str]) -> Any:
    from llama_index_convrag.indices import ConvRAGIndex
    from llama_index_convrag.storage.conversation import SQLiteConversationStore
    from llama_index_convrag.storage.conversation.recovery import open_lease

    llm = resolve_llm(args.base_url, args.model, args.gguf, **limit_kwargs(args))  # errors before any slow work
    check_llm_needs(args, llm is not None)
    store_path = Path(args.store) if args.store is not None else None
    if args.conversation is not None:  # resuming: the store and the conversation must exist, before Milvus
        store_path = store_path if store_path is not None else store_path_for(args.uri, None)
        with closing(open_store(store_path)) as existing:
            require_conversation(existing, args.conversation, store_path)
    target, client = connect(args.uri)
    model = embed_model()
    report = None
    if path is not None:
        report = run_ingest([path], client, target, args.collection, model, out)
        out.note(f"ingest: {len(report.added)} added, {len(report.updated)} updated, "
                 f"{len(report.unchanged)} unchanged, {len(report.unsupported)} unsupported, "
                 f"{len(report.failed)} failed ({report.chunks} new chunks, {report.total_seconds:.1f} s)")
        for line in not_ingested_notes(report):
            out.note(line)
    else:
        require_collection(client, args.collection)
        check_dimension(client, args.collection, model)
    index = ConvRAGIndex.from_collection(args.collection, embed_model=model, client=client, target=target)
    store_path = store_path if store_path is not None else default_store_path(target)
    store = SQLiteConversationStore(store_path)
    _, recovered = open_lease(store, store_path)  # held until exit: marks turns of crashed runs 'interrupted'
    if recovered:
        out.note(f"{len(recovered)} unfinished answer(s) of an earlier run that stopped were marked 'interrupted' "
                 f"(their questions are kept)")
    try:
        engine = index.as_chat_engine(conversation_store=store, **engine_kwargs(args, llm),
                                      retriever_kwargs=retriever_kwargs(args, llm, model))
    except (TypeError, ValueError) as exc:  # an option value the engine refuses (its message names the accepted)
        raise CLIError(EXIT_USAGE, str(exc)) from exc
    limits = llm.limits() if llm is not None and hasattr(llm, "limits") else None
    session = EngineSession(engine, "llm" if llm is not None else RETRIEVAL_ONLY,
                            score_meaning(args.search_type, args.ranker, args.rerank, args.feedback),
                            score_meaning(args.search_type, args.ranker, args.rerank, feedback=False),
                            filters=args.filter or (),
                            retrieval_scores=score_meaning(args.search_type, args.ranker, None, args.feedback),
                            timeout=limits.timeout if limits is not None else None)
    session.limits = limits.to_dict() if limits is not None else None
    resumed = f" (resumed, {len(engine.chat_history)} earlier messages)" if args.conversation is not None else ""
    out.note(f"mode: {session.mode}; collection {args.collection!r}; conversation {session.conversation_id}"
             f"{resumed} in {store_path}")
    if limits is not None:
        out.note(f"llm: {limits.describe()}")
    return session, report


def cmd_ask(args: Any, out: Output) -> int:
    session, report = _session(args, out, args.path)
    turns = []
    for question in [args.question, *(args.follow_up or [])]:
        turn = session.turn(question, out)
        print_turn(turn, out, session.mode)
        turns.append(turn)
    if out.json_mode:
        out.json({"mode": session.mode, "collection": args.collection, "llm_limits": session.limits,
                  "ingest": report.to_dict() if report is not None else None, "turns": turns})
    return EXIT_LLM if any(t["status"] == "error" for t in turns) else 0


def cmd_chat(args: Any, out: Output) -> int:
    session, _ = _session(args, out, args.path)
    interactive = sys.stdin.isatty() and not out.json_mode
    stream = session.mode == "llm"
    turns = []
    code = 0
    if interactive:
        out.note("type a question; /reset starts a new conversation, /quit or Ctrl-D exits")
    while True:
        try:
            line = input("you> ") if interactive else sys.stdin.readline()
        except (EOFError, KeyboardInterrupt):
            if interactive:
                out.text()
            break
        if not interactive and line == "":
            break
        question = line.strip()
        if not question:
            continue
        if question in ("/quit", "/exit"):
            break
        if question == "/reset":
            session.reset()
            out.note(f"new conversation {session.conversation_id}")
            continue
        try:
            check_question(question)  # the limit of ask: this line is refused, the chat goes on
        except CLIError as exc:
            out.stderr.write(f"convrag: error: {exc}\n")
            code = exc.code
            continue
        try:
            turn = session.turn(question, out, stream=stream)
        except CLIError as exc:  # the LLM failed on this question (stored as 'error'): the chat goes on
            if exc.code != EXIT_LLM:
                raise
            out.stderr.write(f"convrag: error: {exc}\n")
            code = exc.code
            turns.append({"question": question, "status": "error", "error": str(exc), "exit_code": exc.code})
            continue
        print_turn(turn, out, session.mode)
        turns.append(turn)
        if turn["status"] == "error":
            code = EXIT_LLM
    if out.json_mode:
        out.json({"mode": session.mode, "collection": args.collection, "llm_limits": session.limits,
                  "turns": turns})
    return code
