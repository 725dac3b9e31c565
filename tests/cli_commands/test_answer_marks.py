"""``ask`` / ``chat`` over a model that answers ``[1]`` when asked to cite (a small model's failure, served over real
HTTP by the local OpenAI-compatible server): the recovered answer is printed with a note, and the sentence no
passage supports is marked (text) and listed (``--json``)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from llama_index_convrag.cli import main
from llama_index_convrag.cli_commands.conversation import RECOVERED_NOTES

TEA = "Green tea should steep for two minutes in water at eighty degrees. Black tea takes boiling water."
UNCITED = "Green tea steeps for two minutes. It was invented on Mars in 1700."
SHOWN = "Green tea steeps for two minutes [1]. It was invented on Mars in 1700."


def markers_when_asked_to_cite(body: Dict[str, Any]) -> Dict[str, Any]:
    return {"content": "[1]" if "square brackets" in body["messages"][-1]["content"] else UNCITED}


@pytest.fixture
def argv(tmp_path: Path, milvus_target: Any, collection_name: str, openai_server: Any) -> List[str]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tea.txt").write_text(TEA, encoding="utf-8")
    openai_server.chat_responder = markers_when_asked_to_cite
    return [str(docs), "--top-k", "1", "--store", str(tmp_path / "c.db"), "--base-url", openai_server.base_url,
            "--model", "x", "--uri", milvus_target.uri, "--collection", collection_name, "--citation-mode", "inline"]


def test_ask_json_carries_the_answer_source_and_the_unsupported_sentence(capsys, argv) -> None:
    code = main(["ask", argv[0], "How long should green tea steep?", *argv[1:], "--json"])
    assert code == 0
    turn = json.loads(capsys.readouterr().out)["turns"][0]
    assert (turn["answer"], turn["answer_source"]) == (SHOWN, "llm_retry_without_citations")
    # each unsupported sentence names what judged it (AnswerOptions.support_scorer; word overlap without a model)
    assert turn["unsupported"] == [{"sentence": 1, "text": "It was invented on Mars in 1700.", "best_source": None,
                                    "overlap": 0.0, "reason": "overlap"}]
    assert turn["citations"][0]["cited_as"] == 1


def test_chat_streams_the_recovered_answer_and_marks_the_unsupported_sentence(capsys, argv, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("How long should green tea steep?\n"))
    assert main(["chat", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:4] == [f"answer> {SHOWN}", RECOVERED_NOTES["llm_retry_without_citations"],
                          "(!) in no passage: It was invented on Mars in 1700."]


def test_by_default_the_model_is_not_asked_to_cite_and_its_answer_is_cited_by_alignment(capsys, argv,
                                                                                       openai_server) -> None:
    default = argv[:-2]  # without --citation-mode inline
    code = main(["ask", default[0], "How long should green tea steep?", *default[1:], "--json"])
    assert code == 0
    turn = json.loads(capsys.readouterr().out)["turns"][0]
    assert (turn["answer"], turn["answer_source"]) == (SHOWN, "llm")  # one call, no retry
    assert turn["citations"][0]["cited_as"] == 1
    chats = [r for r in openai_server.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 1 and "square brackets" not in chats[0].body["messages"][-1]["content"]


def test_a_widened_short_answer_is_noted_and_carried(capsys, argv, openai_server, monkeypatch) -> None:
    (Path(argv[0]) / "game.txt").write_text("Xenoblade Chronicles X was released in Japan on April 29, 2015.",
                                            encoding="utf-8")
    openai_server.chat_responder = lambda body: {"content": "2015"}
    default = argv[:-2]  # aligned, the default
    question = "When was Xenoblade Chronicles X released in Japan?"
    assert main(["ask", default[0], question, *default[1:], "--json"]) == 0
    turn = json.loads(capsys.readouterr().out)["turns"][0]
    assert turn["answer"] == "April 29, 2015 [1]"
    assert turn["answer_completion"] == {"answer": "2015", "shown": "April 29, 2015", "passage": 1}
    monkeypatch.setattr(sys, "stdin", io.StringIO(question + "\n"))
    assert main(["chat", *default]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["answer> April 29, 2015 [1]", "(the model wrote '2015'; shown as passage [1] writes it)"]
