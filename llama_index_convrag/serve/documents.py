"""The documents of knowledge bases: one Milvus collection per base; list, upload (idempotent ingest of one file),
remove; documents named inside their base, never by a server path.

Uploads of a base are kept in its own folder, ``<upload_dir>/<base id>/<name>`` (the name is the document's: the
same name uploaded again with the same bytes is ``unchanged``, with other bytes ``updated``). A document's name is
its path below the first of the base's folders that holds it (:class:`~.views.DocumentNames`): the upload folder,
and for the corpus ``convrag serve`` ingests, the folder its files have in common. An upload that cannot be ingested
is removed (an earlier file of that name is put back).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from llama_index_convrag.ingest import ingest
from llama_index_convrag.ingest.documents import list_documents, remove_documents
from llama_index_convrag.ingest.pipeline import Ingestor
from llama_index_convrag.serve.errors import APIError, not_found
from llama_index_convrag.serve.views import DocumentNames
from llama_index_convrag.storage.conversation.knowledge import KnowledgeBase

FILENAME = re.compile(r"^[^\W_][\w. -]{0,199}$")
"""An upload's name: a letter or digit of any script first, then letters, digits, ``_``, ``.``, ``-`` or spaces (no
folders, no hidden files)."""
FILENAME_RULE = ("a file name of 1 to 200 letters or digits of any script, '_', '.', '-' or spaces, starting with a "
                 "letter or digit (no folders, no hidden files)")


def check_filename(name: str) -> str:
    if not FILENAME.match(name) or name in (".", ".."):
        raise APIError(400, "bad_filename", f"document name {name!r} is not accepted: it must be {FILENAME_RULE}",
                       "name")
    return name


def common_folder(doc_ids: List[str]) -> Optional[str]:
    """The deepest folder holding every one of ``doc_ids`` (absolute POSIX paths), None when there is none."""
    folders = [os.path.dirname(d) for d in doc_ids if d.startswith("/")]
    if not folders:
        return None
    return os.path.commonpath(folders)


@dataclass
class DocumentBackend:
    """Where documents live: a Milvus client (``target``: its URI, for new collections' index type), the embed
    model, the folder uploads are kept in (a folder per knowledge base)."""

    client: Any
    embed_model: Any
    upload_dir: Path
    target: Optional[Any] = None
    #: knowledge base id -> its upload folder, resolved (a turn names its documents: one ``realpath`` a base, not a
    #: turn)
    _folders: Dict[str, Path] = field(default_factory=dict, init=False, repr=False, compare=False)

    def folder(self, kb: KnowledgeBase) -> Path:
        found = self._folders.get(kb.id)
        if found is None:
            found = self._folders[kb.id] = (self.upload_dir / kb.id).resolve()
        return found

    def names(self, kb: KnowledgeBase) -> DocumentNames:
        return DocumentNames(roots=(*kb.roots, self.folder(kb).as_posix()))

    def corpus_roots(self, collection: str) -> Tuple[str, ...]:
        """The folder a served corpus's documents have in common (their names are relative to it)."""
        if not self.client.has_collection(collection):
            return ()
        found = common_folder([d.doc_id for d in list_documents(self.client, collection)])
        return () if found is None else (found,)

    def create(self, kb: KnowledgeBase, analyzer: str = "english") -> None:
        """Create the base's collection (our layout, sized to the embed model)."""
        Ingestor.from_defaults(collection_name=kb.collection, embed_model=self.embed_model, client=self.client,
                               target=self.target, analyzer=analyzer)

    def drop(self, kb: KnowledgeBase) -> None:
        """Drop the base's collection and its uploads."""
        if self.client.has_collection(kb.collection):
            self.client.drop_collection(kb.collection)
        shutil.rmtree(self.folder(kb), ignore_errors=True)
        self._folders.pop(kb.id, None)

    def _documents(self, kb: KnowledgeBase) -> List[Tuple[str, Any]]:
        """``(name, stored document)`` of every document, by name."""
        if not self.client.has_collection(kb.collection):
            return []
        names = self.names(kb)
        return sorted(((str(names(d.doc_id)), d) for d in list_documents(self.client, kb.collection)),
                      key=lambda pair: pair[0])

    def list(self, kb: KnowledgeBase) -> Dict[str, Any]:
        return {"data": [{"name": name, "chunks": d.chunks} for name, d in self._documents(kb)]}

    def put(self, kb: KnowledgeBase, filename: str, data: bytes) -> Dict[str, Any]:
        check_filename(filename)
        folder = self.folder(kb)
        path = folder / filename
        doc_id = path.as_posix()
        clash = [d for name, d in self._documents(kb) if name == filename and d.doc_id != doc_id]
        if clash:
            raise APIError(409, "name_taken", f"knowledge base {kb.name!r} has a document named {filename!r} from "
                                              "the server's own files; upload under another name", "name")
        folder.mkdir(parents=True, exist_ok=True)
        earlier = folder / f".{filename}.earlier"
        had = path.exists()
        if had:
            os.replace(path, earlier)
        path.write_bytes(data)
        try:
            report = ingest([path], collection_name=kb.collection, embed_model=self.embed_model, client=self.client,
                            target=self.target)
        except BaseException:
            self._put_back(path, earlier, had)
            raise
        for status in ("added", "updated", "unchanged"):
            if doc_id in getattr(report, status):
                if had:
                    earlier.unlink(missing_ok=True)
                return {"name": filename, "status": status, "chunks": report.chunks}
        self._put_back(path, earlier, had)
        reasons = dict(report.unsupported + report.failed)
        raise APIError(400, "unreadable_document", f"{filename!r} was not ingested: "
                                                   f"{_reason(reasons.get(doc_id), path)}", "name")

    @staticmethod
    def _put_back(path: Path, earlier: Path, had: bool) -> None:
        """A rejected upload leaves nothing behind: the earlier file of that name is back, or no file."""
        if had:
            os.replace(earlier, path)
        else:
            path.unlink(missing_ok=True)

    def remove(self, kb: KnowledgeBase, name: str) -> None:
        matches = [d for found, d in self._documents(kb) if found == name]
        if not matches:
            raise not_found("document", name)
        remove_documents(self.client, kb.collection, [d.doc_id for d in matches])
        for d in matches:
            if d.doc_id.startswith(self.folder(kb).as_posix() + "/"):
                Path(d.doc_id).unlink(missing_ok=True)

    def close(self) -> None:
        """Close the Milvus client (the app's lifespan calls this at shutdown)."""
        close = getattr(self.client, "close", None)
        if close is not None:
            close()


def _reason(reason: Optional[str], path: Path) -> str:
    """Why an upload was refused, without the server's path."""
    if not reason:
        return "no text found"
    return reason.replace(path.as_posix(), path.name).replace(str(path.parent), "")
