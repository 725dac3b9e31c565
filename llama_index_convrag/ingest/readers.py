"""File -> LlamaIndex ``Document``s for txt, md, html (stdlib), pdf (pypdf) and docx (docx2txt).

A missing optional parser makes the file *unsupported* with a reason naming the package, never silently skipped.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable, Dict, List, Optional

from llama_index.core.schema import Document

from llama_index_convrag.errors import FileParseError, UnsupportedFileError

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
HTML_SUFFIXES = (".html", ".htm")


#: The old name of :class:`~llama_index_convrag.errors.UnsupportedFileError`.
UnsupportedFile = UnsupportedFileError


class _TextExtractor(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template"}
    _BLOCK = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "section", "article", "pre"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: List[str] = []
        self.title: Optional[str] = None
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag == "title":
            self._in_title = False
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title = (self.title or "") + data.strip()
        elif not self._skip:
            self.parts.append(data)


def _title_from_text(text: str, fallback: str) -> str:
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:200]
    return fallback


def read_text(path: Path) -> List[Document]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [Document(text=text, metadata={"title": _title_from_text(text, path.stem)})]


def read_html(path: Path) -> List[Document]:
    parser = _TextExtractor()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    text = re.sub(r"\n\s*\n+", "\n\n", html.unescape("".join(parser.parts))).strip()
    title = parser.title if parser.title else _title_from_text(text, path.stem)
    return [Document(text=text, metadata={"title": title})]


def read_pdf(path: Path) -> List[Document]:
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise UnsupportedFile("PDF needs pypdf: pip install 'llama-index-convrag[docs]'") from exc
    reader = PdfReader(str(path))
    docs = []
    for page, p in enumerate(reader.pages, start=1):
        text = p.extract_text() or ""
        if text.strip():
            docs.append(Document(text=text, metadata={"title": path.stem, "page": page}))
    return docs


def read_docx(path: Path) -> List[Document]:
    try:
        import docx2txt
    except ImportError as exc:
        raise UnsupportedFile("DOCX needs docx2txt: pip install 'llama-index-convrag[docs]'") from exc
    text = docx2txt.process(str(path)) or ""
    return [Document(text=text, metadata={"title": _title_from_text(text, path.stem)})]


READERS: Dict[str, Callable[[Path], List[Document]]] = {
    **{s: read_text for s in TEXT_SUFFIXES},
    **{s: read_html for s in HTML_SUFFIXES},
    ".pdf": read_pdf,
    ".docx": read_docx,
}


def read_file(path: Path) -> List[Document]:
    """Documents of one file (one per PDF page).

    Raises :class:`UnsupportedFileError` with the reason when there is no reader, and :class:`FileParseError` (a
    ``ValueError``) naming the file when its parser fails on it (a corrupt PDF, a DOCX that is not a zip, ...).
    """
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise UnsupportedFile(f"no reader for {path.suffix or 'files without a suffix'!r}; "
                              f"supported: {sorted(READERS)}")
    try:
        return reader(path)
    except (UnsupportedFile, OSError):
        raise
    except Exception as exc:  # parsers raise their own types (pypdf.errors.PdfReadError, zipfile.BadZipFile, ...)
        raise FileParseError(f"cannot parse {path.name!r}: {type(exc).__name__}: {exc}") from exc
