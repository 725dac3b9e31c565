"""``convrag ingest``, ``convrag ask`` and ``convrag chat``.

With an LLM configured a turn goes through ``ConvRAGIndex.as_chat_engine`` (our condense-question engine: LLM
rewrite, retrieval, cited answer, persisted). Without one the turn is retrieval-only: follow-ups are rewritten with
the no-LLM ``concat`` strategy of :class:`QuestionRewriter`, the top passages are shown with citations, and the turn
(question, passages as citations, a turn record) is persisted in the same conversation store.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

from llama_index_convrag.cli_commands.common import (EXIT_INPUT, CLIError, Output, check_dimension, connect,
                                                     default_store_path, embed_model, llm_error,
                                                     require_collection, resolve_llm)

SNIPPET_CHARS = 240


# --- ingest ------------------------------------------------------------------------------------------------
def _ingest(paths: Sequence[str], client: Any, target: Any, collection: str, model: Any, out: Output, *,
            delete_missing: bool = False, chunk_size: Optional[int] = None,
            chunk_overlap: Optional[int] = None) -> Any:
    from llama_index_convrag.ingest import ingest
    from llama_index_convrag.ingest.pipeline import collect_files

    try:
        files, _ = collect_files(list(paths))
    except FileNotFoundError as exc:
        raise CLIError(EXIT_INPUT, str(exc)) from exc
    if not files:
        raise CLIError(EXIT_INPUT, f"no files under {', '.join(map(repr, paths))} (empty folder?)")
    check_dimension(client, collection, model)
    options: Dict[str, Any] = {"show_progress": out.progress}
    if chunk_size is not None:
        options["chunk_size"] = chunk_size
    if chunk_overlap is not None:
        options["chunk_overlap"] = chunk_overlap
    try:
        report = ingest(list(paths), collection_name=collection, embed_model=model, client=client, target=target,
                        delete_missing=delete_missing, **options)
    except ValueError as exc:  # splitter settings, foreign layout
        raise CLIError(EXIT_INPUT if "layout" in str(exc) else 2, str(exc)) from exc
    readable = len(report.added) + len(report.updated) + len(report.skipped)
    if readable == 0:
        kinds = sorted({Path(p).suffix or p for p, _ in report.unsupported})
        raise CLIError(EXIT_INPUT, f"no supported files among {len(files)} under {', '.join(map(repr, paths))} "
                                   f"(unsupported: {kinds}; failed: {len(report.failed)}); "
                                   f"supported: .txt .md .rst .html .htm .pdf .docx")
    return report


def cmd_ingest(args: Any, out: Output) -> int:
    target, client = connect(args.uri)
    model = embed_model()
    report = _ingest(args.paths, client, target, args.collection, model, out, delete_missing=args.delete_missing,
                     chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap)
    if out.json_mode:
        out.json(report.to_dict())
    elif not out.quiet:
        out.text(str(report))
    return 0


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


class RetrievalOnlySession:
    """No LLM: concat rewrite -> retrieve -> passages, persisted as a turn in the conversation store."""

    mode = "retrieval-only"

    def __init__(self, retriever: Any, store: Any, conversation_id: Optional[str] = None) -> None:
        from llama_index_convrag.chat import QuestionRewriter

        self.retriever = retriever
        self.store = store
        self.rewriter = QuestionRewriter(strategy="concat")
        self.conversation_id = conversation_id if conversation_id is not None else uuid.uuid4().hex

    def reset(self) -> None:
        self.conversation_id = uuid.uuid4().hex

    def turn(self, question: str, out: Output, stream: bool = False) -> Dict[str, Any]:
        history = [m.to_chat_message() for m in self.store.history(self.conversation_id)]
        user, placeholder = self.store.begin_turn(self.conversation_id, question)
        started = time.perf_counter()
        rewrite = self.rewriter.rewrite(question, history)
        nodes = self.retriever.retrieve(rewrite.query)
        citations = [_node_info(i, n) for i, n in enumerate(nodes, start=1)]
        self._persist(question, placeholder.id, rewrite, nodes, citations, time.perf_counter() - started)
        return {"conversation_id": self.conversation_id, "message_id": placeholder.id, "question": question,
                "retrieval_query": rewrite.query, "rewrite": rewrite.strategy if rewrite.skipped_reason is None
                else f"none ({rewrite.skipped_reason})", "answer": None, "citations": citations,
                "sources": _sources(citations)}

    def _persist(self, question: str, message_id: str, rewrite: Any, nodes: List[Any],
                 citations: List[Dict[str, Any]], seconds: float) -> None:
        from llama_index_convrag.storage.conversation import Citation

        content = "\n".join(f"[{c['marker']}] {c['source']}:{c['chunk']}" for c in citations) or "(no passages)"
        rows = [Citation(node_id=n.node.node_id, source_index=i, marker=i + 1, ref_doc_id=n.node.ref_doc_id,
                         score=n.score, text=n.node.get_content()[:500]) for i, n in enumerate(nodes)]
        record = {"mode": "retrieval-only", "original_question": question, "retrieval_query": rewrite.query,
                  "rewrite_strategy": rewrite.strategy, "skipped_reason": rewrite.skipped_reason,
                  "retrieved_ids": {"final": [n.node.node_id for n in nodes]}, "latency_s": seconds,
                  "status": "complete"}
        self.store.finish_turn(self.conversation_id, message_id, content=content, status="complete", error=None,
                               citations=rows, record=record)


class EngineSession:
    """With an LLM: our chat engine from ``index.as_chat_engine`` (streams when asked)."""

    mode = "llm"

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    @property
    def conversation_id(self) -> str:
        return self.engine.conversation_id

    def reset(self) -> None:
        self.engine.reset()

    def turn(self, question: str, out: Output, stream: bool = False) -> Dict[str, Any]:
        try:
            if stream and not out.json_mode:
                response = self.engine.stream_chat(question)
                out.text(f"query> {one_line(response.metadata.get('generated_question', question))}")
                out.text("answer> ", end="")
                for delta in response.response_gen:
                    out.text(delta, end="")
                out.text()
                answer, meta = response.response, response.metadata
            else:
                response = self.engine.chat(question)
                answer, meta = response.response, response.metadata
        except Exception as exc:
            mapped = llm_error(exc)
            if mapped is not None:
                raise mapped from exc
            raise
        citations = [_node_info(i, n) for i, n in enumerate(response.source_nodes, start=1)]
        record = meta.get("turn")
        stored = record.citations if record is not None and record.citations else meta.get("citations") or []
        markers = {c.get("source_index"): c.get("marker") for c in stored if isinstance(c, dict)}
        for i, c in enumerate(citations):
            c["cited_as"] = markers.get(i)
        return {"conversation_id": meta.get("conversation_id"), "message_id": meta.get("message_id"),
                "question": question, "retrieval_query": meta.get("generated_question", question),
                "rewrite": getattr(meta.get("turn"), "rewrite_strategy", None), "answer": answer,
                "citations": citations, "sources": _sources(citations), "streamed": stream and not out.json_mode}


def print_turn(turn: Dict[str, Any], out: Output) -> None:
    if out.json_mode:
        return
    if not turn.get("streamed"):
        out.text(f"query> {one_line(turn['retrieval_query'])}")
        if turn["answer"] is not None:
            out.text(f"answer> {turn['answer']}")
    if turn["answer"] is None:
        out.text("(retrieval only: no LLM configured; set OPENAI_API_KEY or --base-url for answers)")
    if not turn["citations"]:
        out.text("no passages found")
    for c in turn["citations"]:
        score = f"{c['score']:.4f}" if c["score"] is not None else "-"
        cited = " (cited)" if c.get("cited_as") is not None else ""
        out.text(f"[{c['marker']}] {c['file']}:{c['chunk']} {score}{cited}")
        if turn["answer"] is None and not out.quiet:
            out.text(f"    {c['text']}")
    out.text("sources: " + (", ".join(turn["sources"]) if turn["sources"] else "-"))
    out.text()


# --- session building ------------------------------------------------------------------------------------
def _session(args: Any, out: Output, path: Optional[str]) -> Any:
    from llama_index_convrag.indices import ConvRAGIndex
    from llama_index_convrag.storage.conversation import SQLiteConversationStore

    llm = resolve_llm(args.base_url, args.model)  # configuration errors before any slow work
    target, client = connect(args.uri)
    model = embed_model()
    report = None
    if path is not None:
        report = _ingest([path], client, target, args.collection, model, out)
        out.note(f"ingest: {len(report.added)} added, {len(report.updated)} updated, "
                 f"{len(report.skipped)} unchanged ({report.chunks} new chunks, {report.total_seconds:.1f} s)")
        for path_, reason in [*report.unsupported, *report.failed]:
            out.note(f"  skipped {Path(path_).name}: {reason}")
    else:
        require_collection(client, args.collection)
        check_dimension(client, args.collection, model)
    index = ConvRAGIndex.from_collection(args.collection, embed_model=model, client=client, target=target)
    store_path = Path(args.store) if args.store is not None else default_store_path(target)
    store = SQLiteConversationStore(store_path)
    retriever_kw = {"similarity_top_k": args.top_k, "search_type": args.search_type}
    if args.search_type == "hybrid":
        retriever_kw["ranker_type"] = args.ranker
    if llm is None:
        session: Any = RetrievalOnlySession(index.as_retriever(**retriever_kw), store)
    else:
        engine = index.as_chat_engine(llm=llm, conversation_store=store, return_generated_question=True,
                                      **retriever_kw)
        session = EngineSession(engine)
    out.note(f"mode: {session.mode}; collection {args.collection!r}; conversation {session.conversation_id} "
             f"in {store_path}")
    return session, report


def cmd_ask(args: Any, out: Output) -> int:
    session, report = _session(args, out, args.path)
    turns = []
    for question in [args.question, *(args.follow_up or [])]:
        turn = session.turn(question, out)
        print_turn(turn, out)
        turns.append(turn)
    if out.json_mode:
        out.json({"mode": session.mode, "collection": args.collection,
                  "ingest": report.to_dict() if report is not None else None, "turns": turns})
    return 0


def cmd_chat(args: Any, out: Output) -> int:
    session, _ = _session(args, out, args.path)
    interactive = sys.stdin.isatty() and not out.json_mode
    stream = session.mode == "llm"
    turns = []
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
        turn = session.turn(question, out, stream=stream)
        print_turn(turn, out)
        turns.append(turn)
    if out.json_mode:
        out.json({"mode": session.mode, "collection": args.collection, "turns": turns})
    return 0
