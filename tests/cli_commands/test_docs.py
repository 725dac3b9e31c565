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
