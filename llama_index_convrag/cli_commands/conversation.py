"""``convrag ingest``, ``convrag ask`` and ``convrag chat``.

Every turn goes through ``ConvRAGIndex.as_chat_engine`` (our chat engine: rewrite, retrieval, cited answer, the
turn persisted in the conversation store); this module only prints it. With an LLM configured the rewrite and the
answer use it; without one the turn is retrieval-only: the no-LLM rewrite and an extractive answer (the retrieved
sentences closest to the question, cited), with the passages shown as its sources.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

from llama_index_convrag.cli_commands.common import (EXIT_INPUT, CLIError, Output, check_dimension, connect,
                                                     default_store_path, embed_model, llm_error,
                                                     require_collection, resolve_llm)

SNIPPET_CHARS = 240
RETRIEVAL_ONLY = "retrieval-only"


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


class EngineSession:
    """Our chat engine from ``index.as_chat_engine``; ``mode`` is ``llm`` or ``retrieval-only`` (streams when asked)."""

    def __init__(self, engine: Any, mode: str) -> None:
        self.engine = engine
        self.mode = mode

    @property
    def conversation_id(self) -> str:
        return self.engine.conversation_id

    def reset(self) -> None:
        self.engine.reset()

    def turn(self, question: str, out: Output, stream: bool = False) -> Dict[str, Any]:
        try:
            if stream and not out.json_mode:
                response = self.engine.stream_chat(question)
                out.text(f"query> {one_line(response.metadata['turn'].retrieval_query)}")
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
        record = meta["turn"]
        markers = {c["source_index"]: c["marker"] for c in record.citations}
        for i, c in enumerate(citations):
            c["cited_as"] = markers.get(i)
        rewrite = record.rewrite_strategy if record.rewrite_skipped_reason is None else \
            f"none ({record.rewrite_skipped_reason})"
        return {"conversation_id": meta["conversation_id"], "message_id": meta["message_id"], "question": question,
                "retrieval_query": record.retrieval_query, "rewrite": rewrite, "answer": answer,
                "citations": citations, "sources": _sources(citations), "streamed": stream and not out.json_mode}


def print_turn(turn: Dict[str, Any], out: Output, mode: str) -> None:
    if out.json_mode:
        return
    if not turn.get("streamed"):
        out.text(f"query> {one_line(turn['retrieval_query'])}")
        out.text(f"answer> {turn['answer']}")
    if mode == RETRIEVAL_ONLY:
        out.text("(retrieval only: extractive answer, no LLM configured; set OPENAI_API_KEY or --base-url for "
                 "generated answers)")
    if not turn["citations"]:
        out.text("no passages found")
    for c in turn["citations"]:
        score = f"{c['score']:.4f}" if c["score"] is not None else "-"
        cited = " (cited)" if c.get("cited_as") is not None else ""
        out.text(f"[{c['marker']}] {c['file']}:{c['chunk']} {score}{cited}")
    out.text("sources: " + (", ".join(turn["sources"]) if turn["sources"] else "-"))
    out.text()


# --- session building ------------------------------------------------------------------------------------
def _session(args: Any, out: Output, path: Optional[str]) -> Any:
    from llama_index_convrag.chat.defaults import NO_LLM_RESPONSE_MODE
    from llama_index_convrag.indices import ConvRAGIndex
    from llama_index_convrag.storage.conversation import SQLiteConversationStore

    llm = resolve_llm(args.base_url, args.model, args.gguf)  # configuration errors before any slow work
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
    answers: Dict[str, Any] = {"llm": llm} if llm is not None else {"response_mode": NO_LLM_RESPONSE_MODE}
    engine = index.as_chat_engine(conversation_store=store, **answers, **retriever_kw)
    session = EngineSession(engine, "llm" if llm is not None else RETRIEVAL_ONLY)
    out.note(f"mode: {session.mode}; collection {args.collection!r}; conversation {session.conversation_id} "
             f"in {store_path}")
    return session, report


def cmd_ask(args: Any, out: Output) -> int:
    session, report = _session(args, out, args.path)
    turns = []
    for question in [args.question, *(args.follow_up or [])]:
        turn = session.turn(question, out)
        print_turn(turn, out, session.mode)
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
        print_turn(turn, out, session.mode)
        turns.append(turn)
    if out.json_mode:
        out.json({"mode": session.mode, "collection": args.collection, "turns": turns})
    return 0
