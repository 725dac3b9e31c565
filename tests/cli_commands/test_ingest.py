"""``convrag ingest``: empty files skipped with a reason, a partial failure exits 3 listing the failed files."""

from llama_index_convrag.cli import main


def test_empty_file_is_skipped_and_a_failed_file_exits_3_with_the_list(capsys, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text("Cats purr when they are content.")
    (folder / "empty.txt").write_text("  \n\n ")
    (folder / "bad.docx").write_text("not a zip")
    db = str(tmp_path / "x.db")
    code = main(["ingest", str(folder), "--uri", db])
    out, err = capsys.readouterr()
    assert code == 3
    assert "1 added, 0 updated, 0 unchanged, 0 deleted, 1 unsupported, 1 failed" in out
    assert f"  unsupported: {folder / 'empty.txt'} (empty file: no text to index)" in out
    assert err.endswith("convrag: error: 1 file(s) could not be ingested: bad.docx (the others are stored)\n")
    (folder / "bad.docx").unlink()
    assert main(["ingest", str(folder), "--uri", db]) == 0  # the good file is stored: unchanged now
    assert "0 added, 0 updated, 1 unchanged, 0 deleted, 1 unsupported, 0 failed" in capsys.readouterr().out


def test_a_long_path_with_a_small_chunk_size_ingests_and_exits_0(capsys, tmp_path):
    """Metadata is not counted against --chunk-size (chunks are embedded without it)."""
    folder = tmp_path / ("a_long_folder_name_" * 8)
    folder.mkdir()
    (folder / ("a_long_file_name_" * 10 + ".txt")).write_text("The ls command lists directory contents. " * 40)
    code = main(["ingest", str(folder), "--uri", str(tmp_path / "x.db"), "--chunk-size", "16"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "1 added, 0 updated, 0 unchanged, 0 deleted, 0 unsupported, 0 failed" in out
    assert "Metadata length" not in out + err
