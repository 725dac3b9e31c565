"""File -> LlamaIndex ``Document``s for txt, md, html (stdlib), pdf (pypdf) and docx (docx2txt).

A missing optional parser makes the file *unsupported* with a reason naming the extra to install, never silently
skipped. Text and HTML files are decoded by :func:`decode_text`: a byte-order mark wins, then strict UTF-8, then
charset detection (charset-normalizer); a file with NUL bytes or no decodable text is refused as binary
(:class:`~llama_index_convrag.errors.BinaryFileError`) instead of being stored as replacement characters.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from charset_normalizer import from_bytes
from llama_index.core.schema import Document

from llama_index_convrag.errors import BinaryFileError, FileParseError, UnsupportedFileError

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
HTML_SUFFIXES = (".html", ".htm")
DOCS_EXTRA_HINT = 'pip install "llama-index-convrag[docs]"'
#: Byte-order marks, longest first (the UTF-32 LE mark starts with the UTF-16 LE one).
BOMS: Tuple[Tuple[bytes, str], ...] = (
    (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"),
)
#: Windows-1252 is the most common legacy encoding; charset detection on short Western text often ranks a Baltic
#: or Central-European code page first. Within this chaos margin of the best guess, cp1252 is preferred.
CP1252_MARGIN = 0.1


#: The old name of :class:`~llama_index_convrag.errors.UnsupportedFileError`.
UnsupportedFile = UnsupportedFileError
#: A text-suffixed file whose bytes are not text (:class:`~llama_index_convrag.errors.BinaryFileError`).
BinaryFile = BinaryFileError


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


def _detect(data: bytes) -> Optional[str]:
    """The encoding charset-normalizer finds for ``data`` (cp1252 preferred on near ties), or None."""
    matches = list(from_bytes(data))
    if not matches:
        return None
    best = matches[0]
    if best.encoding.startswith(("utf_16", "utf_32")):
        return best.encoding
    for m in matches:
        if m.encoding == "cp1252" and m.chaos <= best.chaos + CP1252_MARGIN:
            return "cp1252"
    try:
        if data.decode("cp1252") == str(best):  # the same text either way (German in cp1250 ...)
            return "cp1252"
    except UnicodeDecodeError:
        pass
    return best.encoding


def decode_text(data: bytes, name: str) -> Tuple[str, str]:
    """``(text, encoding)`` of a text file's bytes; :class:`BinaryFile` naming ``name`` when they are not text."""
    for bom, encoding in BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom):].decode(encoding.replace("-sig", "")), encoding
            except UnicodeDecodeError as exc:
                raise BinaryFile(f"binary file: {name!r} starts with a {encoding} byte-order mark but does not "
                                 f"decode as {encoding} ({exc.reason} at byte {exc.start})") from exc
    nul = data.find(b"\x00")
    if nul < 0:
        try:
            return data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            pass
    encoding = _detect(data)
    if nul >= 0 and (encoding is None or not encoding.startswith(("utf_16", "utf_32"))):
        raise BinaryFile(f"binary file: {name!r} has a NUL byte at offset {nul} (not text; rename it or "
                         f"remove it from the folder)")
    if encoding is None:
        raise BinaryFile(f"binary file: {name!r} is not UTF-8 and no text encoding decodes it")
    return data.decode(encoding), encoding


def _read_decoded(path: Path) -> str:
    return decode_text(path.read_bytes(), path.name)[0]


def read_text(path: Path) -> List[Document]:
    text = _read_decoded(path)
    return [Document(text=text, metadata={"title": _title_from_text(text, path.stem)})]


def read_html(path: Path) -> List[Document]:
    parser = _TextExtractor()
    parser.feed(_read_decoded(path))
    text = re.sub(r"\n\s*\n+", "\n\n", html.unescape("".join(parser.parts))).strip()
    title = parser.title if parser.title else _title_from_text(text, path.stem)
    return [Document(text=text, metadata={"title": title})]


def read_pdf(path: Path) -> List[Document]:
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise UnsupportedFile(f"PDF support needs the docs extra (pypdf): {DOCS_EXTRA_HINT}") from exc
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
        raise UnsupportedFile(f"DOCX support needs the docs extra (docx2txt): {DOCS_EXTRA_HINT}") from exc
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

    Raises :class:`UnsupportedFileError` with the reason when there is no reader (:class:`BinaryFileError` when a
    text file's bytes are not text), and :class:`FileParseError` (a ``ValueError``) naming the file when its parser
    fails on it (a corrupt PDF, a DOCX that is not a zip, ...).
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
