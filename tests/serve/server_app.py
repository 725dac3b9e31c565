"""The app the serve tests run in a real uvicorn process: a Milvus Lite file with a few documents, the local
embedding model, a ScriptedLLM whose stream waits ``CONVRAG_TEST_TOKEN_DELAY`` seconds per token (so a client can
disconnect mid-stream), and the conversation store named by ``CONVRAG_TEST_STORE`` (a SQLite path or a PostgreSQL URL).
For the benches: ``CONVRAG_TEST_CITATION_MODE`` (the answers' citation mode; default the engine's),
``CONVRAG_TEST_FIRST_TOKEN_LOG`` (a file to which each answer stream appends ``time.monotonic()`` of its first token).
Crash recovery: ``CONVRAG_TEST_WORKER_NAME`` (a restart under it frees the claims at once), ``CONVRAG_TEST_LEASE_S``,
``CONVRAG_TEST_PARTIAL_SAVE_S``. Memory: ``CONVRAG_TEST_MEMORY`` (``convrag serve --memory``'s parts: recall, summary,
facts; the summary and the facts are written by :func:`memory_llm`), ``CONVRAG_TEST_MEMORY_WINDOW`` (default 2),
``CONVRAG_TEST_MEMORY_FACTS=every`` (every user message is a fact: the load bench's questions state none),
``CONVRAG_TEST_MEMORY_WRITERS`` (``--memory-writers``; default the option's).

Run: ``uvicorn --factory tests.serve.server_app:create`` with ``CONVRAG_TEST_DIR`` set.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import ChatResponseAsyncGen, CompletionResponseAsyncGen

from llama_index_convrag.chat import AnswerOptions, RewriteOptions
from llama_index_convrag.cli_commands.memory_options import memory_options
from llama_index_convrag.embeddings import LocalMiniLMEmbedding
from llama_index_convrag.indices import ConvRAGIndex
from llama_index_convrag.ingest import ingest
from llama_index_convrag.memory import ConversationMemory
from llama_index_convrag.milvus.client import connect_milvus, resolve_milvus
from llama_index_convrag.serve import DocumentBackend, EnginesPerCollection, Limits, RateLimits, create_app
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.storage.conversation.postgres import PostgresConversationStore
from llama_index_convrag.testing import ScriptedLLM

DOCS = {
    "bm25.md": "BM25 is a ranking function used by search engines. Milvus computes BM25 with an analyzer.",
    "milvus.md": "Milvus Lite is an embedded vector database stored in one file. Milvus servers scale out.",
    "fusion.md": "Reciprocal rank fusion merges ranked lists by summing one over sixty plus the rank.",
}
ANSWER = "The answer cites the passages [1] and keeps going with many more words so that a stream takes a while " * 3
#: A follow-up's standalone question (a separate scripted model: the answering one would rewrite every follow-up into
#: ANSWER, which the engine would then read as an answer restating its question)
REWRITE = "What do the documents say about the follow-up?"


#: what memory_llm writes as the summary of any messages
SUMMARY = "The user asked about search: BM25, Milvus and fusion."
_FACT_MESSAGE = re.compile(r"User message:\n(.*?)\n\nFacts:", re.S)


def memory_llm(every: bool = False) -> ScriptedLLM:
    """The memory's scripted LLM: a fold gives :data:`SUMMARY`; an extraction gives the user's message as a fact
    when it says "my" (or ``every`` time; else ``NONE``); a reconcile adds."""
    def reply(prompt: str) -> str:
        if "New summary:" in prompt or "Shortened summary:" in prompt:
            return SUMMARY
        found = _FACT_MESSAGE.search(prompt)
        if found is not None:
            message = found.group(1).strip()
            return f"- {message}" if every or re.search(r"\bmy\b", message, re.I) else "NONE"
        return "ADD"
    return ScriptedLLM.from_fn(reply)


#: CONVRAG_TEST_STORE_CALLS -> create_app's store_on_loop
STORE_CALLS = {"auto": None, "loop": True, "threads": False}


class PacedLLM(ScriptedLLM):
    """A ScriptedLLM whose async streams wait between tokens."""

    async def astream_chat(self, messages: Any, **kwargs: Any) -> ChatResponseAsyncGen:  # type: ignore[override]
        inner = await super().astream_chat(messages, **kwargs)
        return _paced(inner)

    async def astream_complete(self, prompt: str, formatted: bool = False,
                               **kwargs: Any) -> CompletionResponseAsyncGen:  # type: ignore[override]
        inner = await super().astream_complete(prompt, formatted=formatted, **kwargs)
        return _paced(inner)


async def _paced(gen: Any) -> Any:
    delay = float(os.environ.get("CONVRAG_TEST_TOKEN_DELAY", "0"))
    log = os.environ.get("CONVRAG_TEST_FIRST_TOKEN_LOG")
    first = True
    async for item in gen:
        if delay:
            await asyncio.sleep(delay)
        if first and log:
            with open(log, "a") as f:
                f.write(f"{time.monotonic()!r}\n")
        first = False
        yield item


def create() -> Any:
    root = Path(os.environ["CONVRAG_TEST_DIR"])
    docs = root / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    target = resolve_milvus(os.environ.get("CONVRAG_TEST_MILVUS", str(root / "milvus.db")))
    client = connect_milvus(target)
    model = LocalMiniLMEmbedding()
    collection = "serve_docs"
    if os.environ.get("CONVRAG_TEST_INGEST", "1") == "1":
        ingest([docs], collection_name=collection, embed_model=model, client=client, target=target)
    store_spec = os.environ.get("CONVRAG_TEST_STORE", str(root / "chats.db"))
    store = (PostgresConversationStore(store_spec) if store_spec.startswith("postgresql")
             else SQLiteConversationStore(store_spec))
    llm = PacedLLM.fixed(ANSWER)
    citation_mode = os.environ.get("CONVRAG_TEST_CITATION_MODE")
    writers = os.environ.get("CONVRAG_TEST_MEMORY_WRITERS")
    options = memory_options(argparse.Namespace(memory=os.environ.get("CONVRAG_TEST_MEMORY"), memory_window=int(
        os.environ.get("CONVRAG_TEST_MEMORY_WINDOW", "2")), memory_writers=None if writers is None else int(writers)),
        has_llm=True)
    memory = None if options is None else ConversationMemory.from_defaults(
        options, store=store, embed_model=model, client=client, target=target,
        llm=memory_llm(every=os.environ.get("CONVRAG_TEST_MEMORY_FACTS") == "every"))

    def build(name: str) -> Any:  # one template engine per knowledge base collection
        index = ConvRAGIndex.from_collection(name, embed_model=model, client=client, target=target)
        return index.as_chat_engine(conversation_store=store, llm=llm, memory=memory,
                                    rewrite=RewriteOptions(llm=ScriptedLLM.fixed(REWRITE)),
                                    answer=AnswerOptions(citation_mode=citation_mode) if citation_mode else None,
                                    retriever_kwargs={"similarity_top_k": 2})

    limits = Limits(max_question_chars=int(os.environ.get("CONVRAG_TEST_MAX_QUESTION", "500")), max_page_size=50,
                    max_body_bytes=64 * 1024, resume_grace_s=float(os.environ.get("CONVRAG_TEST_RESUME_GRACE", "0.5")),
                    ping_s=float(os.environ.get("CONVRAG_TEST_PING_S", "15")),
                    lease_s=float(os.environ.get("CONVRAG_TEST_LEASE_S", "10")),
                    partial_save_s=float(os.environ.get("CONVRAG_TEST_PARTIAL_SAVE_S", "1")))
    rate = RateLimits(requests=_rate(os.environ.get("CONVRAG_TEST_RATE_REQUESTS", "100000/minute")),
                      turns=_rate(os.environ.get("CONVRAG_TEST_RATE_TURNS", "100000/minute")))
    backend = DocumentBackend(client=client, embed_model=model, upload_dir=root / "uploads", target=target)
    app = create_app(store=store, engine_for=EnginesPerCollection(build), limits=limits, documents_backend=backend,
                     collection=collection, llm=llm.metadata.model_name, rate_limits=rate,
                     cors_origins=[o for o in os.environ.get("CONVRAG_TEST_CORS", "").split(",") if o],
                     store_on_loop=STORE_CALLS[os.environ.get("CONVRAG_TEST_STORE_CALLS", "auto")],  # bench --store-calls
                     worker_name=os.environ.get("CONVRAG_TEST_WORKER_NAME"), memory=memory)
    app.add_middleware(WorkerPid)
    return app


def _rate(value: str) -> Any:
    return None if value == "off" else value


class WorkerPid:
    """Adds ``X-Worker-Pid`` (which worker answered: the two-worker test); pure ASGI, streams pass untouched."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def tagged(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-worker-pid", str(os.getpid()).encode())]}
            await send(message)

        await self.app(scope, receive, tagged if scope["type"] == "http" else send)
