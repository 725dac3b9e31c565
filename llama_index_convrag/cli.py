"""``convrag``: ingest folders into Milvus, ask and chat over them, evaluate retrieval and conversations.

Commands: ``ingest``, ``ask``, ``chat``, ``docs list``, ``docs remove``, ``conversations list``,
``conversations export``, ``eval retrieval``, ``eval conversation``, ``bench embed``, ``bench list`` (each has
``--help`` with examples). Without an LLM (no ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` / ``--base-url``) ``ask`` and
``chat`` run retrieval-only: extractive answers citing the top passages. Exit codes are listed in :data:`~llama_index_convrag.cli_commands.common.EXIT_CODES_HELP` (``--help``).
With ``--json`` an error is also printed on stdout as ``{"error": {"exit_code", "type", "message"}}``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
import warnings
from typing import Any, Callable, Optional, Sequence

from llama_index_convrag._limits import MAX_QUESTION_CHARS
from llama_index_convrag.cli_commands.common import (EXIT_CODES_HELP, EXIT_INTERRUPTED, EXIT_UNEXPECTED,
                                                     EXIT_USAGE, CLIError, Output, check_collection_name,
                                                     check_question, check_uri)
from llama_index_convrag.retrievers.modes import DEFAULT_RANKER_TYPE, FUSION_TYPES, SEARCH_TYPES

#: BM25 analyzers of ``milvus.schema.ANALYZERS`` (kept here so that ``--help`` does not import pymilvus; a test
#: checks they agree).
ANALYZER_CHOICES = ("chinese", "english", "jieba", "standard")
#: The engine's choice lists, repeated for the same reason (``tests/cli_commands/test_engine_options.py`` checks
#: each against its source):
#: ``synthesizers.registry.registered_modes()``, ``chat.defaults.REWRITE_STRATEGIES``, ``chat.defaults.CHAT_MODES``,
#: ``cli_commands.engine_options.RERANKERS``, ``synthesizers.citations.CITATION_MODES``.
RESPONSE_MODE_CHOICES = ("accumulate", "compact", "compact_accumulate", "context_only", "extractive", "generation",
                         "no_text", "refine", "simple_summarize", "tree_summarize")
REWRITE_STRATEGY_CHOICES = ("auto", "llm", "contextual", "concat", "none")
CHAT_MODE_CHOICES = ("condense_question", "condense_plus_context", "context")
RERANK_CHOICES = ("embedding", "llm")
CITATION_MODE_CHOICES = ("inline", "aligned")
DEFAULT_COLLECTION = "convrag"
DESCRIPTION = "convrag: ingest folders into Milvus, ask and chat over them, evaluate retrieval and conversations."

MAIN_EPILOG = f"""examples:
  convrag ingest docs/                         index a folder into ./convrag.db (collection 'convrag')
  convrag ask docs/ "How does one chat turn flow?" --follow-up "What if it fails?"
  printf 'q1\\nq2\\n' | convrag chat docs/        one question per line from stdin
  convrag chat docs/ --conversation ID --filter file_name=guide.md --rerank embedding
  convrag eval retrieval ../shared/data/scifact --max-queries 200
  convrag bench list

environment: CONVRAG_MILVUS_URI (default ./convrag.db), CONVRAG_MILVUS_TOKEN (a Milvus server's token: user:password
or an API key), OPENAI_API_KEY, OPENAI_BASE_URL, CONVRAG_LLM_MODEL, CONVRAG_LLM_CONTEXT_WINDOW, CONVRAG_LLM_MAX_TOKENS,
CONVRAG_LLM_TIMEOUT, CONVRAG_EMBED_MODEL (default: the local MiniLM model, no network)

{EXIT_CODES_HELP}"""


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers >= ``minimum``, naming the bad value otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse


def _question(text: str) -> str:
    """An argparse ``type`` for questions: blank ones are usage errors (exit 2); the length is checked later."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the question is blank; type a question")
    return text


_positive = _int_at_least(1)
_non_negative = _int_at_least(0)


def _common(parser: argparse.ArgumentParser, *, collection: Optional[str] = DEFAULT_COLLECTION,
            json_help: str = "machine-readable JSON on stdout") -> None:
    parser.add_argument("--uri", default=None,
                        help="Milvus Lite file or server URI (default: $CONVRAG_MILVUS_URI or ./convrag.db); a "
                             "secured server's token comes from $CONVRAG_MILVUS_TOKEN")
    parser.add_argument("--collection", default=collection,
                        help=f"collection name (default: {collection if collection else 'named after the data set'})")
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars or notes")
    parser.add_argument("--debug", action="store_true", help="tracebacks and debug logging")


def _llm_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", default=None,
                        help="OpenAI-compatible server (default: $OPENAI_BASE_URL); with none and no "
                             "$OPENAI_API_KEY the command runs retrieval-only")
    parser.add_argument("--model", default=None, help="LLM model name (default: $CONVRAG_LLM_MODEL or gpt-4o-mini)")
    parser.add_argument("--gguf", default=None, metavar="PATH",
                        help="answer with this local GGUF model through llama.cpp's OpenAI-compatible server on "
                             "127.0.0.1 (extra 'llamacpp'); not with --base-url")


def _chat_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--top-k", type=_positive, default=5,
                        help="passages per turn (default 5): each hit read with its neighbouring chunks (--widen), "
                             "hits of one passage merged, the first top-k passages of the top 2 x top-k hits "
                             "(--no-widen: the top-k hits as they are)")
    parser.add_argument("--widen", type=_int_at_least(0), default=1, metavar="CHUNKS",
                        help="neighbouring chunks read on each side of a hit (default 1; 0: the matched chunks "
                             "alone); the token budget cuts a passage back to its hit before dropping any")
    parser.add_argument("--no-widen", dest="widen", action="store_const", const=0,
                        help="read the matched chunks alone (--widen 0)")
    parser.add_argument("--search-type", choices=SEARCH_TYPES, default="hybrid", help="default hybrid")
    parser.add_argument("--ranker", choices=FUSION_TYPES, default=DEFAULT_RANKER_TYPE,
                        help=f"hybrid fusion (default {DEFAULT_RANKER_TYPE}: per-query min-max normalised, the "
                             "library default)")
    parser.add_argument("--no-feedback", dest="feedback", action="store_false",
                        help="hybrid weighted: skip the dense pseudo-relevance feedback search (on by default; it "
                             "costs two more Milvus calls)")
    parser.add_argument("--rerank", choices=RERANK_CHOICES, default=None,
                        help="rerank the fused candidates (max(10, the hits)): embedding (passage windows re-scored "
                             "by the embedding model, offline) or llm (the LLM ranks them); default: none")
    parser.add_argument("--filter", action="append", default=None, metavar="COND",
                        help="metadata condition, repeatable (all must hold): KEY=VALUE or KEY OP VALUE with OP "
                             "==, !=, >, >=, <, <= (e.g. file_name=notes.md, chunk>=2); a JSON number, true/false "
                             "or quoted string keeps its type")
    parser.add_argument("--response-mode", choices=RESPONSE_MODE_CHOICES, default=None,
                        help="how the answer is written (the engine's response_mode; default compact with an LLM, "
                             "extractive without; context_only, extractive, no_text need no LLM)")
    parser.add_argument("--rewrite-strategy", choices=REWRITE_STRATEGY_CHOICES, default=None,
                        help="how a follow-up becomes a retrieval query (default auto: llm with an LLM, contextual "
                             "without; contextual, concat, none need no LLM)")
    parser.add_argument("--chat-mode", choices=CHAT_MODE_CHOICES, default=None,
                        help="the engine's chat_mode (default condense_question)")
    parser.add_argument("--system-prompt", default=None, metavar="TEXT",
                        help="system prompt of the answers (with an LLM and --chat-mode condense_plus_context or "
                             "context)")
    parser.add_argument("--conversation", default=None, metavar="ID",
                        help="resume a stored conversation (see 'convrag conversations list')")
    parser.add_argument("--store", default=None,
                        help="SQLite conversation store (default: convrag_chats.db next to the Milvus file)")
    _llm_options(parser)
    _limit_options(parser)


def _seconds(text: str) -> float:
    """An argparse ``type`` accepting a number of seconds > 0, naming the bad value otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def _limit_options(parser: argparse.ArgumentParser) -> None:
    """The LLM's limits (``engine_options.limit_kwargs``; ``config.model_limits``) and ``--no-citations``."""
    parser.add_argument("--context-window", type=_int_at_least(256), default=None, metavar="TOKENS",
                        help="the model's context window (default: $CONVRAG_LLM_CONTEXT_WINDOW, else what the "
                             "server reports: llama.cpp GET /props, GET /v1/models; else 8192)")
    parser.add_argument("--max-tokens", type=_positive, default=None, metavar="TOKENS",
                        help="output limit sent with every LLM call (default: $CONVRAG_LLM_MAX_TOKENS, else the "
                             "server's, else 512); an answer cut at it is stored as 'error' with its text")
    parser.add_argument("--llm-timeout", type=_seconds, default=None, metavar="SECONDS",
                        help="seconds per LLM request, streamed (between chunks) or not (default: "
                             "$CONVRAG_LLM_TIMEOUT or 300)")
    parser.add_argument("--no-citations", dest="citations", action="store_false",
                        help="answers without [n] citation markers (the passages are still listed)")
    parser.add_argument("--citation-mode", choices=CITATION_MODE_CHOICES, default=None,
                        help="how answers are cited: inline (the LLM is asked to write [n]) or aligned (the LLM "
                             "answers without a citation instruction, each sentence is then cited with the passage "
                             "that supports it); default: the engine's")


def _sub(subparsers: "argparse._SubParsersAction", name: str, help_text: str, examples: str,
         func: Optional[Callable] = None) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(name, help=help_text, description=help_text,
                                   epilog=f"examples:\n{examples}\n\n{EXIT_CODES_HELP}",
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    if func is not None:
        parser.set_defaults(func=func)
    return parser


def build_parser() -> argparse.ArgumentParser:
    from llama_index_convrag.cli_commands import bench, conversation, conversations, docs, evaluate, ingest
    from llama_index_convrag.cli_commands import keys, memory, serve

    parser = argparse.ArgumentParser(prog="convrag", description=DESCRIPTION,
                                     epilog=MAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"convrag {package_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = _sub(commands, "ingest", "Index files and folders (txt, md, rst, html, pdf, docx) into a collection.",
             "  convrag ingest docs/ notes.md\n  convrag ingest docs/ --delete-missing --chunk-size 256 --json\n"
             "  convrag ingest docs/ --uri http://localhost:19530 --collection team_docs",
             ingest.cmd_ingest)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--delete-missing", action="store_true", help="drop stored documents whose files are gone")
    p.add_argument("--chunk-size", type=_positive, default=None,
                   help="tokens per chunk, counted by the embedding model (default: its window, 254 for the local "
                        "MiniLM, so each chunk's vector reads all of it)")
    p.add_argument("--chunk-overlap", type=_non_negative, default=None,
                   help="token overlap (default: an eighth of the chunk, at most 50)")
    p.add_argument("--analyzer", choices=ANALYZER_CHOICES, default=None,
                   help="BM25 analyzer of a new collection (default english; Milvus Lite 3.x servers: standard)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: this process (default); ray: Ray Data workers into a Milvus server (--uri http://...)")
    p.add_argument("--workers", type=_positive, default=2, help="with --engine ray: tasks per stage (default 2)")
    _common(p)

    p = _sub(commands, "ask", "Ingest PATH (unchanged files are skipped), then answer a question and its "
             "follow-ups as one conversation.",
             '  convrag ask docs/ "How does one chat turn flow?"\n'
             '  convrag ask docs/ "What is hybrid search?" --follow-up "Which ranker is the default?"\n'
             '  OPENAI_BASE_URL=http://localhost:8000/v1 convrag ask docs/ "..." --model qwen2.5\n'
             '  convrag ask docs/ "..." --search-type dense --top-k 3 --json',
             conversation.cmd_ask)
    p.add_argument("path", metavar="PATH")
    p.add_argument("question", type=_question)
    p.add_argument("--follow-up", action="append", metavar="Q", type=_question,
                   help="a follow-up turn (repeatable)")
    _chat_options(p)
    _common(p)

    p = _sub(commands, "chat", "Chat over PATH (or an existing collection): interactive on a terminal "
             "(/reset, /quit, Ctrl-D), one question per line from stdin otherwise.",
             "  convrag chat docs/\n  printf 'What is BM25?\\nAnd the analyzer?\\n' | convrag chat docs/\n"
             "  convrag chat --collection team_docs --base-url http://localhost:8000/v1 --model llama3",
             conversation.cmd_chat)
    p.add_argument("path", nargs="?", default=None, metavar="PATH")
    _chat_options(p)
    _common(p)

    dc = _sub(commands, "docs", "List or remove the documents stored in a collection (e.g. those of files that "
              "were renamed or deleted).",
              "  convrag docs list --missing\n  convrag docs remove --missing\n"
              "  convrag docs remove old_notes/ --dry-run")
    dc_cmds = dc.add_subparsers(dest="docs_command", metavar="ACTION", required=True)
    p = _sub(dc_cmds, "list", "Stored documents (one per file) with their chunk counts; files that no longer exist "
             "are marked.",
             "  convrag docs list\n  convrag docs list --missing --json\n  convrag docs list --under docs/",
             docs.cmd_docs_list)
    p.add_argument("--missing", action="store_true", help="only documents whose file no longer exists")
    p.add_argument("--under", default=None, metavar="FOLDER", help="only documents under FOLDER")
    _common(p)
    p = _sub(dc_cmds, "remove", "Remove stored documents: those at or under PATH (the files may be gone), and/or "
             "with --missing every document whose file no longer exists.",
             "  convrag docs remove --missing\n  convrag docs remove old_name/ --dry-run\n"
             "  convrag docs remove docs/draft.md --collection team_docs",
             docs.cmd_docs_remove)
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.add_argument("--missing", action="store_true", help="documents whose file no longer exists")
    p.add_argument("--dry-run", action="store_true", help="show what would be removed, remove nothing")
    _common(p)

    cv = _sub(commands, "conversations", "List or export the conversations 'ask' and 'chat' stored (resume one "
              "with --conversation ID).",
              "  convrag conversations list\n  convrag conversations export 3f2a... --format markdown\n"
              "  convrag chat docs/ --conversation 3f2a...")
    cv_cmds = cv.add_subparsers(dest="conversations_command", metavar="ACTION", required=True)
    p = _sub(cv_cmds, "list", "Stored conversations: id, number of questions, last update, first question.",
             "  convrag conversations list\n  convrag conversations list --json --store chats.db",
             conversations.cmd_conversations_list)
    p.add_argument("--store", default=None, help="conversation store (default: convrag_chats.db next to the Milvus "
                                                 "file of --uri)")
    _common(p, collection=None)
    p = _sub(cv_cmds, "export", "One conversation: every question and answer with its status and citations, and "
             "the turn records (JSON) or a readable transcript (markdown).",
             "  convrag conversations export ID\n  convrag conversations export ID --format markdown > chat.md",
             conversations.cmd_conversations_export)
    p.add_argument("conversation_id", metavar="ID")
    p.add_argument("--format", choices=("json", "markdown"), default="json", help="default json")
    p.add_argument("--store", default=None, help="conversation store (default: convrag_chats.db next to the Milvus "
                                                 "file of --uri)")
    _common(p, collection=None)

    _serve_commands(commands, keys, serve)
    _memory_commands(commands, memory)

    ev = _sub(commands, "eval", "Evaluate retrieval (BEIR) or conversational retrieval (TREC CAsT).",
              "  convrag eval retrieval ../shared/data/scifact --max-queries 200\n"
              "  convrag eval conversation ../shared/data/trec_cast")
    ev_cmds = ev.add_subparsers(dest="eval_command", metavar="KIND", required=True)
    p = _sub(ev_cmds, "retrieval", "nDCG@10, Recall@100, MRR and latency of retriever configurations on a "
             "BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).",
             "  convrag eval retrieval ../shared/data/scifact\n"
             "  convrag eval retrieval ../shared/data/scifact --max-queries 200 --configs dense,hybrid-rrf\n"
             "  convrag eval retrieval data/nfcorpus --split test --out results/ --json",
             evaluate.cmd_eval_retrieval)
    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("--split", default="train", help="qrels split (default train)")
    p.add_argument("--configs", default=",".join(evaluate.RETRIEVAL_CONFIGS),
                   help=f"comma-separated subset of {','.join(evaluate.RETRIEVAL_CONFIGS)} (default: all)")
    p.add_argument("--max-queries", type=_positive, default=None, help="first N judged queries")
    p.add_argument("--out", default="convrag_eval", help="report and plot folder (default ./convrag_eval/)")
    p.add_argument("--rebuild", action="store_true", help="re-index the corpus even if the collection is complete")
    _common(p, collection=None, json_help="JSON summary on stdout")

    p = _sub(ev_cmds, "conversation", "Replay TREC CAsT turns: raw vs concat vs manual rewrite (and the LLM "
             "rewrite when an LLM is configured) over the turns' gold passages.",
             "  convrag eval conversation ../shared/data/trec_cast\n"
             "  convrag eval conversation turns.jsonl --max-dialogues 5 --top-k 10 --json\n"
             "  convrag eval conversation ../shared/data/trec_cast --base-url http://localhost:8000/v1 --model x",
             evaluate.cmd_eval_conversation)
    p.add_argument("dataset", metavar="DATASET", help="turns.jsonl or the folder holding it")
    p.add_argument("--years", default="2021", help="comma-separated CAsT years (default 2021: it has gold "
                                                    "passages); empty for all")
    p.add_argument("--max-dialogues", type=_positive, default=None,
                   help="replay the first N dialogues (the passages of all loaded ones stay as distractors)")
    p.add_argument("--top-k", type=_positive, default=10, help="default 10")
    p.add_argument("--search-type", choices=SEARCH_TYPES, default="hybrid", help="default hybrid")
    p.add_argument("--out", default="convrag_eval", help="report and plot folder (default ./convrag_eval/)")
    p.add_argument("--rebuild", action="store_true", help="re-index the passages")
    _llm_options(p)
    _common(p, collection=None, json_help="JSON summary on stdout")

    be = _sub(commands, "bench", "Measure the local embedding model or list the checkout's benchmark scripts.",
              "  convrag bench embed --passages 64\n  convrag bench list")
    be_cmds = be.add_subparsers(dest="bench_command", metavar="KIND", required=True)
    p = _sub(be_cmds, "embed", "Passage embedding throughput and query latency of the embedding model, "
             "measured now on this machine.",
             "  convrag bench embed\n  convrag bench embed --passages 256 --batch-size 64 --json",
             bench.cmd_bench_embed)
    p.add_argument("--passages", type=_positive, default=64)
    p.add_argument("--words", type=_positive, default=120, help="words per passage (default 120)")
    p.add_argument("--batch-size", type=_positive, default=32)
    p.add_argument("--queries", type=_positive, default=50)
    p.add_argument("--json", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true")
    p.add_argument("--debug", action="store_true")
    p = _sub(be_cmds, "list", "List bench/*.py of the source checkout this is run from, with how to run them.",
             "  cd llama-index-convrag && convrag bench list", bench.cmd_bench_list)
    p.add_argument("--json", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true")
    p.add_argument("--debug", action="store_true")
    return parser


def _memory_commands(commands: "argparse._SubParsersAction", memory: Any) -> None:
    """``convrag memory``: a conversation's running summary and a user's facts."""
    mc = _sub(commands, "memory", "What the chat memory keeps: show, edit or clear a conversation's running summary; "
              "list or delete a user's facts.",
              "  convrag memory show 3f2a... --versions\n  convrag memory edit 3f2a... \"Ana is the user's sister.\"\n"
              "  convrag memory clear 3f2a...\n  convrag memory facts --user alice\n"
              "  convrag memory forget FACT_ID --user alice")
    m_cmds = mc.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    for name, help_text, func in (
            ("show", "A conversation's summary (its current version; --versions: every version).",
             memory.cmd_memory_show),
            ("edit", "Replace a conversation's summary with TEXT ('-': read stdin), kept as a new version.",
             memory.cmd_memory_edit),
            ("clear", "Delete every version of a conversation's summary.", memory.cmd_memory_clear),
            ("facts", "A user's facts: id, text, the message each came from.", memory.cmd_memory_facts),
            ("forget", "Delete a user's facts (with their history): the ones named, or --all.",
             memory.cmd_memory_forget)):
        p = _sub(m_cmds, name, help_text, f"  convrag memory {name}", func)
        if name in ("show", "edit", "clear"):
            p.add_argument("conversation_id", metavar="ID")
        if name == "show":
            p.add_argument("--versions", action="store_true", help="every version, oldest first")
        if name == "edit":
            p.add_argument("text", metavar="TEXT")
            p.add_argument("--max-tokens", type=_positive, default=None, metavar="TOKENS",
                           help="the summary's token cap (default: SummaryOptions' 400)")
        if name == "facts":
            p.add_argument("--history", action="store_true", help="replaced and retracted facts too")
        if name == "forget":
            p.add_argument("fact_ids", nargs="*", metavar="FACT_ID")
            p.add_argument("--all", action="store_true", help="every fact of the user")
        p.add_argument("--user", default=memory.DEFAULT_USER,
                       help=f"whose memory (default {memory.DEFAULT_USER!r}: what ask, chat and the engine write)")
        p.add_argument("--store", default=None, help="conversation store: a SQLite path or a postgresql+psycopg:// "
                                                     "URL (default: convrag_chats.db next to the Milvus file of --uri)")
        _common(p, collection=None)


def _serve_commands(commands: "argparse._SubParsersAction", keys: Any, serve: Any) -> None:
    """``convrag serve`` and ``convrag keys`` (docs/SERVE.md)."""
    p = _sub(commands, "serve", "Ingest PATHs (if given), then serve the chat engine over HTTP: an OpenAI-compatible "
             "endpoint and the conversation API (docs/SERVE.md).",
             "  convrag serve docs/\n  convrag serve --host 0.0.0.0 --workers 4 --uri http://milvus:19530 "
             "--store postgresql+psycopg://app@db/convrag", serve.cmd_serve)
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (without API keys only loopback)")
    p.add_argument("--port", type=_positive, default=8000, help="default 8000")
    p.add_argument("--workers", type=_positive, default=1,
                   help="worker processes (more than 1: a Milvus server and the PostgreSQL store)")
    p.add_argument("--upload-dir", default=None, help="where uploaded documents are kept (default ./convrag_uploads)")
    p.add_argument("--max-body-bytes", type=_positive, default=1 << 20, help="default 1 MiB")
    p.add_argument("--max-upload-bytes", type=_positive, default=20 << 20, help="default 20 MiB")
    p.add_argument("--max-question-chars", type=_positive, default=MAX_QUESTION_CHARS,
                   help=f"default {MAX_QUESTION_CHARS} (as ask and chat)")
    p.add_argument("--max-page-size", type=_positive, default=100, help="default 100")
    p.add_argument("--turn-timeout-s", type=_positive, default=600,
                   help="a turn claim made without the server's worker lease expires after this (default 600)")
    p.add_argument("--lease-s", type=_seconds, default=10.0,
                   help="the worker's lease on the turns it answers, renewed every third of it: a killed server's "
                        "unfinished answers become 'interrupted' (text kept) when it restarts on the same host:port, "
                        "or when the lease lapses (default 10)")
    p.add_argument("--partial-save-s", type=_seconds, default=1.0,
                   help="a streaming answer's text so far is saved at most this often, kept if the server dies "
                        "(default 1)")
    p.add_argument("--resume-grace-s", type=_non_negative, default=10,
                   help="a streamed answer whose client went away keeps answering this long, so the client can "
                        "resume it (Last-Event-ID), then it is cancelled; 0: at once (default 10)")
    p.add_argument("--rate-limit", default="1200/minute", metavar="RATE",
                   help="requests per API key, e.g. 600/minute or 10/second;300/hour; off: none (default 1200/minute)")
    p.add_argument("--turn-rate-limit", default="60/minute", metavar="RATE",
                   help="turns (messages, regenerations, chat completions) per API key; off: none (default 60/minute)")
    p.add_argument("--cors-origin", action="append", metavar="ORIGIN",
                   help="a browser origin allowed to call the API, e.g. https://chat.example.com (repeatable; "
                        "default: none, only the page the server serves)")
    _memory_options(p)
    _chat_options(p)
    _common(p)
    kc = _sub(commands, "keys", "Create, list or revoke the API keys of 'convrag serve' (stored hashed).",
              "  convrag keys create alice\n  convrag keys create ci-bot --scope chat\n  convrag keys list\n"
              "  convrag keys revoke KEY_ID")
    k_cmds = kc.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    for name, help_text, func in (("create", "A new key for USER, printed once.", keys.cmd_keys_create),
                                  ("list", "Every key: id, user, prefix, scopes, created, revoked.", keys.cmd_keys_list),
                                  ("revoke", "Revoke a key by id.", keys.cmd_keys_revoke)):
        p = _sub(k_cmds, name, help_text, f"  convrag keys {name}", func)
        if name == "create":
            p.add_argument("user", metavar="USER")
            p.add_argument("--scope", action="append", choices=("chat", "edit", "admin"), default=None,
                           help="what the key may do (repeatable): chat (conversations, reading knowledge bases), "
                                "edit (knowledge bases and their documents, as the user's roles allow), admin "
                                "(users and keys; an admin user only); default chat and edit")
        if name == "revoke":
            p.add_argument("key_id", metavar="KEY_ID")
        _store_option(p)
    us = _sub(commands, "users", "List the users of 'convrag serve' or set a user's role (member or admin).",
              "  convrag users list\n  convrag users set-role alice admin")
    u_cmds = us.add_subparsers(dest="users_command", metavar="ACTION", required=True)
    p = _sub(u_cmds, "list", "Every user with their role.", "  convrag users list", keys.cmd_users_list)
    _store_option(p)
    p = _sub(u_cmds, "set-role", "Set USER's role (the user is created when new).",
             "  convrag users set-role alice admin", keys.cmd_users_set_role)
    p.add_argument("user", metavar="USER")
    p.add_argument("role", choices=("member", "admin"))
    _store_option(p)
    _kb_commands(commands)


def _memory_options(p: argparse.ArgumentParser) -> None:
    """``convrag serve``'s memory (``cli_commands/memory_options.py`` maps them onto ``MemoryOptions``)."""
    p.add_argument("--memory", nargs="?", const="recall,summary", default=None, metavar="PARTS",
                   help="memory for long conversations, a comma list of recall (earlier messages found again), "
                        "summary (a running summary, by the LLM) and facts (what users say about themselves; needs "
                        "an LLM); --memory alone: recall,summary (then put PATHs before it); default off")
    p.add_argument("--memory-window", type=_non_negative, default=None, metavar="N",
                   help="recent messages every prompt holds; recall looks before them, the summary folds what "
                        "leaves them (default 6)")
    p.add_argument("--recall-k", type=_positive, default=None, metavar="N",
                   help="earlier messages a turn recalls at most (default 10)")
    p.add_argument("--summary-max-tokens", type=_int_at_least(16), default=None, metavar="TOKENS",
                   help="the summary's cap, never exceeded (default 400)")
    p.add_argument("--summary-no-llm", choices=("none", "salient"), default=None,
                   help="the summary without an LLM: none (default) or salient (names and numbers)")
    p.add_argument("--memory-writers", type=_positive, default=None, metavar="N",
                   help="threads that run the memory writes after the turns (one conversation's writes in order on "
                        "one of them; default 4)")


def _store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, help="the store 'convrag serve' uses (SQLite file or "
                                                 "postgresql+psycopg:// URL)")
    _common(p, collection=None)


def _kb_commands(commands: "argparse._SubParsersAction") -> None:
    """``convrag kb``: knowledge bases, their members and documents (docs/SERVE.md)."""
    from llama_index_convrag.cli_commands import kb

    kc = _sub(commands, "kb", "Knowledge bases of 'convrag serve': make one, fill it from files, share it (reader "
              "or editor), list, delete.",
              "  convrag kb create team-docs --owner alice\n  convrag kb ingest team-docs docs/team/\n"
              "  convrag kb share team-docs bob --role editor\n  convrag kb share team-docs '*'   # every user reads"
              "\n  convrag kb list")
    k_cmds = kc.add_subparsers(dest="kb_command", metavar="ACTION", required=True)
    p = _sub(k_cmds, "list", "Every knowledge base: name, id, owner, members.", "  convrag kb list", kb.cmd_kb_list)
    _store_option(p)
    p = _sub(k_cmds, "create", "A new, empty knowledge base (its own collection).",
             "  convrag kb create team-docs --owner alice --analyzer chinese", kb.cmd_kb_create)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--owner", default="local", help="its owner (default local, the server's operator)")
    p.add_argument("--description", default=None)
    p.add_argument("--analyzer", choices=("english", "standard", "chinese", "jieba"), default="english",
                   help="how its BM25 field splits text (default english)")
    _store_option(p)
    p = _sub(k_cmds, "ingest", "Ingest files and folders into a knowledge base (idempotent, as 'convrag ingest').",
             "  convrag kb ingest team-docs docs/team/ notes.md", kb.cmd_kb_ingest)
    p.add_argument("name", metavar="NAME")
    p.add_argument("paths", nargs="+", metavar="PATH")
    _store_option(p)
    for action, help_text, func in (("share", "Give USER (or * for every user) a role in the knowledge base.",
                                     kb.cmd_kb_share),
                                    ("unshare", "Remove USER (or *) from the knowledge base's members.",
                                     kb.cmd_kb_unshare)):
        p = _sub(k_cmds, action, help_text, f"  convrag kb {action} team-docs bob", func)
        p.add_argument("name", metavar="NAME")
        p.add_argument("user", metavar="USER")
        if action == "share":
            p.add_argument("--role", choices=("reader", "editor"), default="reader", help="default reader")
        _store_option(p)
    p = _sub(k_cmds, "members", "The members of a knowledge base with their roles.", "  convrag kb members team-docs",
             kb.cmd_kb_members)
    p.add_argument("name", metavar="NAME")
    _store_option(p)
    p = _sub(k_cmds, "delete", "Delete a knowledge base and its collection (its conversations stay).",
             "  convrag kb delete old-docs", kb.cmd_kb_delete)
    p.add_argument("name", metavar="NAME")
    _store_option(p)


def package_version() -> str:
    """The installed distribution's version."""
    from importlib.metadata import version

    return version("llama-index-convrag")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``convrag`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    argv = list(argv) if argv is not None else sys.argv[1:]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already explained on stderr
        code = int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
        if code != 0 and "--json" in argv:
            Output(json_mode=True).json({"error": {"exit_code": code, "type": "usage",
                                                   "message": "bad command line (see stderr)"}})
        return code
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.debug:  # milvus-lite 2.5.1 warns about pkg_resources on import
        warnings.filterwarnings("ignore", category=UserWarning, module="milvus_lite")
    out = Output(json_mode=args.json, quiet=args.quiet)
    try:
        validate_args(args)
        return int(args.func(args, out))
    except CLIError as exc:
        if args.debug:
            traceback.print_exc()
        out.error(exc.code, str(exc), "error")
        return exc.code
    except KeyboardInterrupt as exc:
        return _interrupted(exc, out)
    except Exception as exc:  # noqa: BLE001 - one line for users, the traceback with --debug
        if args.debug:
            traceback.print_exc()
        out.error(EXIT_UNEXPECTED, f"unexpected error: {type(exc).__name__}: {exc} (rerun with --debug)",
                  "unexpected")
        return EXIT_UNEXPECTED


def validate_args(args: argparse.Namespace) -> None:
    """Checks that need no I/O, run before any command opens a file or a connection."""
    if getattr(args, "uri", None) is not None:
        check_uri(args.uri)
    if getattr(args, "collection", None) is not None:
        check_collection_name(args.collection)
    for attr in ("question",):
        if getattr(args, attr, None) is not None:
            setattr(args, attr, check_question(getattr(args, attr)))
    if getattr(args, "follow_up", None):
        args.follow_up = [check_question(q, "follow-up") for q in args.follow_up]
    if args.command in ("ask", "chat"):
        from llama_index_convrag.cli_commands.engine_options import check_static
        from llama_index_convrag.cli_commands.ingest import candidate_files

        check_static(args)
        if args.path is not None:
            candidate_files([args.path])


def _interrupted(exc: KeyboardInterrupt, out: Output) -> int:
    """Exit 130; an interrupted ingest says what it kept and that re-running resumes."""
    from llama_index_convrag.ingest.progress import IngestInterrupted

    if isinstance(exc, IngestInterrupted):
        if out.json_mode:
            out.json(exc.report.to_dict())
        out.stderr.write(f"convrag: interrupted\n{exc.report}\n")
    else:
        out.stderr.write("convrag: interrupted\n")
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
