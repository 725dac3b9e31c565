"""``/v1/documents``: list, upload (idempotent ingest of one file) and remove the index's documents.

Uploaded files are written under the backend's ``upload_dir`` (their name is their id: the same name uploaded
again with the same bytes is ``unchanged``, with other bytes ``updated``). Documents are shared by every user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from llama_index_convrag.ingest import ingest
from llama_index_convrag.ingest.documents import list_documents, remove_documents
from llama_index_convrag.serve.auth import current_user
from llama_index_convrag.serve.errors import APIError, not_found

router = APIRouter(prefix="/v1", tags=["documents"])
FILENAME = re.compile(r"^[^\W_][\w. -]{0,199}$")
"""An upload's name: a letter or digit of any script first, then letters, digits, ``_``, ``.``, ``-`` or spaces (no
folders, no hidden files)."""


@dataclass
class DocumentBackend:
    """Where documents live: a Milvus client and collection, the embed model, the folder uploads are kept in."""

    client: Any
    collection_name: str
    embed_model: Any
    upload_dir: Path

    def list(self) -> Dict[str, Any]:
        if not self.client.has_collection(self.collection_name):
            return {"data": []}
        return {"data": [d.to_dict() for d in list_documents(self.client, self.collection_name)]}

    def put(self, filename: str, data: bytes) -> Dict[str, Any]:
        if not FILENAME.match(filename) or filename in (".", ".."):
            raise APIError(400, "bad_filename", f"filename {filename!r} must match {FILENAME.pattern} (no folders)",
                           "filename")
        self.upload_dir.mkdir(parents=True, exist_ok=True)
        path = (self.upload_dir / filename).resolve()
        path.write_bytes(data)
        report = ingest([path], collection_name=self.collection_name, embed_model=self.embed_model,
                        client=self.client)
        doc_id = path.as_posix()
        for status in ("added", "updated", "unchanged"):
            if doc_id in getattr(report, status):
                return {"doc_id": doc_id, "status": status, "chunks": report.chunks}
        reasons = dict(report.unsupported + report.failed)
        raise APIError(400, "unreadable_document", f"{filename!r} was not ingested: "
                                                   f"{reasons.get(doc_id, 'no text found')}", "filename")

    def remove(self, doc_id: str) -> None:
        known = {d.doc_id for d in list_documents(self.client, self.collection_name)} \
            if self.client.has_collection(self.collection_name) else set()
        if doc_id not in known:
            raise not_found("document", doc_id)
        remove_documents(self.client, self.collection_name, [doc_id])


def _backend(request: Request) -> DocumentBackend:
    backend = request.app.state.serve.documents
    if backend is None:
        raise APIError(404, "no_documents", "this server was started without a document index")
    return backend


@router.get("/documents")
def get_documents(request: Request, user: str = Depends(current_user)) -> Dict[str, Any]:
    return _backend(request).list()


@router.put("/documents/{filename}")
async def put_document(filename: str, request: Request, user: str = Depends(current_user)) -> Dict[str, Any]:
    data = await request.body()
    return await run_in_threadpool(_backend(request).put, filename, data)


@router.delete("/documents/{doc_id:path}", status_code=204)
def delete_document(doc_id: str, request: Request, user: str = Depends(current_user)) -> Response:
    _backend(request).remove(doc_id if doc_id.startswith("/") else "/" + doc_id)
    return Response(status_code=204)
