import sys
import zipfile
from pathlib import Path

import pytest

from llama_index_convrag.ingest.readers import BinaryFile, UnsupportedFile, decode_text, read_file


def write_pdf(path: Path, pages: list) -> None:
    """A minimal valid PDF (Helvetica text, one line per page) with a correct xref table."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>")
    font_id = 3 + 2 * len(pages)
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
                       f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>")
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = b"%PDF-1.4\n"
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(out)


def write_docx(path: Path, paragraphs: list) -> None:
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("[Content_Types].xml",
                   '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                   '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
                   'officedocument.wordprocessingml.document.main+xml"/></Types>')
        z.writestr("word/document.xml",
                   '<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
                   f'wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>')


def test_pdf_one_document_per_page(tmp_path):
    pdf = tmp_path / "paper.pdf"
    write_pdf(pdf, ["Milvus stores vectors", "BM25 ranks words"])
    docs = read_file(pdf)
    assert [d.metadata["page"] for d in docs] == [1, 2]
    assert [d.text.strip() for d in docs] == ["Milvus stores vectors", "BM25 ranks words"]
    assert docs[0].metadata["title"] == "paper"


def test_docx_text(tmp_path):
    docx = tmp_path / "memo.docx"
    write_docx(docx, ["Quarterly memo", "Hybrid search shipped."])
    (doc,) = read_file(docx)
    assert "Quarterly memo" in doc.text and "Hybrid search shipped." in doc.text
    assert doc.metadata["title"] == "Quarterly memo"


@pytest.mark.parametrize("name,payload", [("broken.pdf", b"%PDF-1.4"), ("broken.docx", b"not a zip")])
def test_corrupt_files_raise_value_error_naming_them(tmp_path, name, payload):
    path = tmp_path / name
    path.write_bytes(payload)
    with pytest.raises(ValueError, match=f"cannot parse '{name}'"):
        read_file(path)


@pytest.mark.parametrize("module,name,payload,kind", [("pypdf", "a.pdf", b"%PDF-1.4 corrupt", "PDF"),
                                                      ("docx2txt", "a.docx", b"not a zip", "DOCX")])
def test_missing_parser_is_unsupported_with_the_install_hint(tmp_path, monkeypatch, module, name, payload, kind):
    """Even a corrupt file says what to install first (the README's `[local]` install has no parsers)."""
    monkeypatch.setitem(sys.modules, module, None)
    path = tmp_path / name
    path.write_bytes(payload)
    with pytest.raises(UnsupportedFile) as info:
        read_file(path)
    assert str(info.value) == f'{kind} support needs the docs extra ({module}): pip install "llama-index-convrag[docs]"'


def test_unknown_suffix_lists_supported(tmp_path):
    path = tmp_path / "a.xyz"
    path.write_text("x")
    with pytest.raises(UnsupportedFile, match=r"no reader for '.xyz'; supported: \['.docx', '.htm'"):
        read_file(path)


# --- encodings and binary refusal ------------------------------------------------------------------------------
FRENCH = "Café crème brûlée, déjà vu à la française. Le garçon a mangé."


@pytest.mark.parametrize("text,payload,encoding", [
    (FRENCH, FRENCH.encode("utf-8"), "utf-8"),
    (FRENCH, b"\xef\xbb\xbf" + FRENCH.encode("utf-8"), "utf-8-sig"),
    (FRENCH, FRENCH.encode("latin-1"), "cp1252"),
    ("Café crème", "Café crème".encode("latin-1"), "cp1252"),
    ("Die Straße ist schön und grün.", "Die Straße ist schön und grün.".encode("latin-1"), "cp1252"),
    ("Zażółć gęślą jaźń. Świętość języka.", "Zażółć gęślą jaźń. Świętość języka.".encode("cp1250"), "cp1250"),
    (FRENCH, b"\xff\xfe" + FRENCH.encode("utf-16-le"), "utf-16-le"),
    (FRENCH, b"\xfe\xff" + FRENCH.encode("utf-16-be"), "utf-16-be"),
    (FRENCH, b"\xff\xfe\x00\x00" + FRENCH.encode("utf-32-le"), "utf-32-le"),
])
def test_text_encodings_are_detected(text, payload, encoding):
    assert decode_text(payload, "f.txt") == (text, encoding)


def test_cyrillic_legacy_encoding_is_detected():
    text = "Привет, как дела? Это тест кодировки для русского текста."
    assert decode_text(text.encode("cp1251"), "ru.txt") == (text, "cp1251")


def test_utf16_without_bom_is_text_not_binary():
    text = "Hello world, this is UTF-16 text without a byte-order mark."
    assert decode_text(text.encode("utf-16-le"), "u.txt")[0] == text


def test_latin1_file_is_read_with_its_accents(tmp_path):
    path = tmp_path / "menu.txt"
    path.write_bytes(FRENCH.encode("latin-1"))
    (doc,) = read_file(path)
    assert doc.text == FRENCH and "\ufffd" not in doc.text


def test_latin1_html_is_read_with_its_accents(tmp_path):
    path = tmp_path / "menu.html"
    path.write_bytes(f"<html><title>Menu</title><body><p>{FRENCH}</p></body></html>".encode("latin-1"))
    (doc,) = read_file(path)
    assert doc.text == FRENCH and doc.metadata["title"] == "Menu"


def test_executable_renamed_txt_is_refused_as_binary(tmp_path):
    path = tmp_path / "binary.txt"
    path.write_bytes(Path(sys.executable).resolve().read_bytes()[:65536])
    with pytest.raises(BinaryFile, match=r"binary file: 'binary.txt' has a NUL byte at offset \d+"):
        read_file(path)


def test_undecodable_bytes_without_nul_are_refused(tmp_path):
    path = tmp_path / "noise.md"
    path.write_bytes(bytes(range(0x80, 0x100)) * 40)  # no NUL; invalid UTF-8; no code page reads it as text
    with pytest.raises(BinaryFile, match="binary file: 'noise.md' is not UTF-8 and no text encoding decodes it"):
        read_file(path)


def test_bom_that_lies_is_refused():
    with pytest.raises(BinaryFile, match="starts with a utf-8-sig byte-order mark but does not decode"):
        decode_text(b"\xef\xbb\xbf\xff\xfe\xfd", "bad.txt")
