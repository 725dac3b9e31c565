"""``ask`` and ``chat`` say that no passage matched (the filter) instead of "Empty Response"."""

import io

import pytest

from llama_index_convrag.cli import main
from llama_index_convrag.cli_commands.conversation import no_passage_answer


def test_no_passage_answer_names_the_filters():
    assert no_passage_answer(["file_name=a.md", "chunk>=2"]) == (
        "no passage matched the filter (file_name=a.md and chunk>=2); nothing to answer from")
    assert no_passage_answer([]) == "no passage matched the question; nothing to answer from"


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("The chat engine stores every message before it answers.")
    return docs


def test_ask_with_a_filter_matching_nothing(capsys, tmp_path, folder):
    code = main(["ask", str(folder), "How are messages stored?", "--filter", "file_name=nothing.md",
                 "--uri", str(tmp_path / "x.db")])
    out = capsys.readouterr().out
    assert code == 0
    assert "answer> no passage matched the filter (file_name=nothing.md); nothing to answer from\n" in out
    assert "Empty Response" not in out


def test_chat_streaming_with_a_filter_matching_nothing(capsys, tmp_path, folder, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("How are messages stored?\n"))
    code = main(["chat", str(folder), "--filter", "file_name=nothing.md", "--uri", str(tmp_path / "x.db")])
    out = capsys.readouterr().out
    assert code == 0
    assert "answer> no passage matched the filter (file_name=nothing.md); nothing to answer from\n" in out
    assert "Empty Response" not in out


def test_chat_refuses_a_question_past_the_limit_of_ask_and_goes_on(capsys, tmp_path, folder, monkeypatch):
    from llama_index_convrag.cli_commands.common import EXIT_TOO_LARGE, MAX_QUESTION_CHARS

    long = "x" * (MAX_QUESTION_CHARS + 1)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{long}\nHow are messages stored?\n"))
    code = main(["chat", str(folder), "--uri", str(tmp_path / "x.db")])
    out, err = capsys.readouterr()
    assert code == EXIT_TOO_LARGE
    message = f"the question is {MAX_QUESTION_CHARS + 1:,} characters; the limit is {MAX_QUESTION_CHARS:,}"
    assert f"convrag: error: {message}" in err
    assert out.count("answer> ") == 1 and "[1]" in out  # the next question is answered
    assert main(["ask", str(folder), long, "--uri", str(tmp_path / "x.db")]) == EXIT_TOO_LARGE
    assert message in capsys.readouterr().err
