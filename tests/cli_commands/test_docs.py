"""``convrag docs list/remove`` against real Milvus Lite: the renamed-folder case of issue 14."""

import json
import shutil
from pathlib import Path

import pytest

from llama_index_convrag.cli import main
from llama_index_convrag.ingest.documents import list_documents, remove_documents, under


def run(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def renamed(tmp_path, milvus_target, collection_name, capsys):
    """`a/` ingested, then renamed to `a_renamed/` and ingested with --delete-missing (the old documents stay)."""
    a = tmp_path / "a"
    a.mkdir()
    (a / "one.txt").write_text("Giraffes have long necks and eat acacia leaves.")
    (a / "two.md").write_text("# Tea\n\nGreen tea steeps for two minutes.")
    where = ["--uri", milvus_target.uri, "--collection", collection_name]
    assert run(capsys, ["ingest", str(a), "-q", *where])[0] == 0
    b = tmp_path / "a_renamed"
    shutil.move(str(a), str(b))
    assert run(capsys, ["ingest", str(b), "--delete-missing", "-q", *where])[0] == 0
    return a.resolve(), b.resolve(), where


def test_list_marks_documents_of_vanished_files(capsys, renamed):
    old, new, where = renamed
    code, out, err = run(capsys, ["docs", "list", *where, "--json"])
    assert code == 0, err
    docs = {d["doc_id"]: d for d in json.loads(out)["documents"]}
    assert sorted(docs) == sorted([(old / "one.txt").as_posix(), (old / "two.md").as_posix(),
                                   (new / "one.txt").as_posix(), (new / "two.md").as_posix()])
    assert {d: v["exists"] for d, v in docs.items()} == {d: d.startswith(new.as_posix()) for d in docs}
    assert all(v["chunks"] == 1 for v in docs.values())

    code, out, err = run(capsys, ["docs", "list", "--missing", *where])
    assert code == 0
    assert out.splitlines() == [f"{(old / 'one.txt').as_posix()}\t1 chunks\t(file missing)",
                                f"{(old / 'two.md').as_posix()}\t1 chunks\t(file missing)"]
    assert "2 documents" in err and "2 with a missing file" in err and "docs remove --missing" in err


def test_remove_missing_then_only_the_live_documents_remain(capsys, renamed, milvus_client):
    old, new, where = renamed
    code, out, _ = run(capsys, ["docs", "remove", "--missing", "--dry-run", *where])
    assert code == 0 and out.count("would remove ") == 2
    assert len(list_documents(milvus_client, where[-1])) == 4  # dry run removed nothing
    code, out, _ = run(capsys, ["docs", "remove", "--missing", *where, "--json"])
    assert code == 0
    assert sorted(d["doc_id"] for d in json.loads(out)["removed"]) == [(old / "one.txt").as_posix(),
                                                                        (old / "two.md").as_posix()]
    left = list_documents(milvus_client, where[-1])
    assert [d.doc_id for d in left] == [(new / "one.txt").as_posix(), (new / "two.md").as_posix()]


def test_remove_by_path_prefix_and_errors(capsys, renamed, milvus_client):
    old, new, where = renamed
    code, out, _ = run(capsys, ["docs", "remove", str(new / "two.md"), *where])
    assert code == 0 and out == f"removed {(new / 'two.md').as_posix()} (1 chunks)\n"
    code, _, err = run(capsys, ["docs", "remove", *where])
    assert code == 2 and "say what to remove: PATH..." in err
    code, _, err = run(capsys, ["docs", "remove", "/nowhere", *where])
    assert code == 3 and "no stored document matches" in err
    code, _, err = run(capsys, ["docs", "list", "--uri", where[1], "--collection", "absent_one"])
    assert code == 3 and "collection 'absent_one' does not exist" in err


def test_under_is_a_path_prefix_not_a_string_prefix():
    assert under("/a/b/c.txt", Path("/a/b")) and under("/a/b", Path("/a/b"))
    assert not under("/a/bc/d.txt", Path("/a/b"))


def test_remove_documents_counts_and_list_filters(renamed, milvus_client):
    old, new, where = renamed
    assert [d.doc_id for d in list_documents(milvus_client, where[-1], folder=new)] == [
        (new / "one.txt").as_posix(), (new / "two.md").as_posix()]
    assert remove_documents(milvus_client, where[-1], [(old / "one.txt").as_posix()]) == 1
    assert [d.doc_id for d in list_documents(milvus_client, where[-1], missing_only=True)] == [
        (old / "two.md").as_posix()]


def test_list_flags_a_half_stored_document_and_the_next_ingest_repairs_it(capsys, tmp_path, milvus_target,
                                                                        collection_name, milvus_client):
    folder = tmp_path / "docs"
    folder.mkdir()
    long = folder / "long.txt"
    long.write_text(" ".join(f"Sentence {i} is about topic {i % 5} and goes on for a while." for i in range(200)))
    (folder / "short.txt").write_text("Owls hunt at night.")
    where = ["--uri", milvus_target.uri, "--collection", collection_name]
    assert run(capsys, ["ingest", str(folder), "-q", *where])[0] == 0
    doc = long.resolve().as_posix()
    rows = milvus_client.query(collection_name, filter=f'doc_id == "{doc}"', output_fields=["metadata"])
    total = len(rows)
    assert total > 3 and {r["metadata"]["chunk_count"] for r in rows} == {total}
    milvus_client.delete(collection_name, ids=[r["id"] for r in rows[:2]])  # as a run cut off mid-document leaves it

    code, out, err = run(capsys, ["docs", "list", *where])
    assert code == 0, err
    assert out.splitlines() == [f"{doc}\t{total - 2} chunks\t(incomplete: {total - 2} of {total} chunks stored)",
                                f"{(folder / 'short.txt').resolve().as_posix()}\t1 chunks"]
    assert "1 incomplete (an interrupted or failed run): the next 'convrag ingest' of their files stores them" in err
    listed = {d["doc_id"]: d for d in json.loads(run(capsys, ["docs", "list", *where, "--json"])[1])["documents"]}
    assert (listed[doc]["complete"], listed[doc]["expected_chunks"], listed[doc]["chunks"]) == (False, total, total - 2)

    code, out, _ = run(capsys, ["ingest", str(folder), *where])
    assert code == 0 and "0 added, 1 updated, 1 unchanged" in out
    assert [d.complete for d in list_documents(milvus_client, collection_name)] == [True, True]
    assert run(capsys, ["docs", "list", *where])[1].splitlines()[0] == f"{doc}\t{total} chunks"


def test_list_on_a_file_that_does_not_exist_creates_nothing(capsys, tmp_path):
    code, out, err = run(capsys, ["docs", "list", "--uri", str(tmp_path / "x.db")])
    assert (code, out) == (3, "")
    assert err == (f"convrag: error: no Milvus Lite file at {str(tmp_path / 'x.db')!r}; run 'convrag ingest PATH "
                   f"--uri {tmp_path / 'x.db'}' first\n")
    assert list(tmp_path.iterdir()) == []
