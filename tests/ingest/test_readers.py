import sys
import zipfile
from pathlib import Path

import pytest

from llama_index_convrag.ingest.readers import UnsupportedFile, read_file


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


def test_missing_parser_is_unsupported_with_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pypdf", None)
    pdf = tmp_path / "a.pdf"
    write_pdf(pdf, ["x"])
    with pytest.raises(UnsupportedFile, match=r"pypdf: pip install 'llama-index-convrag\[docs\]'"):
        read_file(pdf)


def test_unknown_suffix_lists_supported(tmp_path):
    path = tmp_path / "a.xyz"
    path.write_text("x")
    with pytest.raises(UnsupportedFile, match=r"no reader for '.xyz'; supported: \['.docx', '.htm'"):
        read_file(path)
