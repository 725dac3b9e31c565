"""The app the browser tests serve (``uvicorn --factory tests.web.server_app:create``) until ``convrag serve`` has
its command: the documents folder ``CONVRAG_WEB_DOCS`` ingested with the real local model into a Milvus Lite file,
the SQLite store, and the LLM ``config.resolve_llm`` builds from ``OPENAI_BASE_URL`` (as ``convrag chat`` does).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from llama_index_convrag.config import resolve_llm
from llama_index_convrag.embeddings import LocalMiniLMEmbedding
from llama_index_convrag.indices import ConvRAGIndex
from llama_index_convrag.ingest import ingest
from llama_index_convrag.milvus.client import connect_milvus, resolve_milvus
from llama_index_convrag.serve import DocumentBackend, create_app, shared_engine_for
from llama_index_convrag.storage.conversation import SQLiteConversationStore

COLLECTION = "web_docs"


def create() -> Any:
    work = Path(os.environ["CONVRAG_WEB_WORK"])
    target = resolve_milvus(str(work / "milvus.db"))
    client = connect_milvus(target)
    model = LocalMiniLMEmbedding()
    ingest([Path(os.environ["CONVRAG_WEB_DOCS"])], collection_name=COLLECTION, embed_model=model, client=client,
           target=target)
    store = SQLiteConversationStore(str(work / "chats.db"))
    index = ConvRAGIndex.from_collection(COLLECTION, embed_model=model, client=client, target=target)
    template = index.as_chat_engine(conversation_store=store, llm=resolve_llm())
    backend = DocumentBackend(client=client, collection_name=COLLECTION, embed_model=model,
                              upload_dir=work / "uploads")
    return create_app(store=store, engine_for=shared_engine_for(template), documents_backend=backend)
