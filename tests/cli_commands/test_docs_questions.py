"""Eight questions over this checkout's own docs through ``convrag ask`` without an LLM (the extractive answer): the
file that states the fact is the first source and the answer holds the fact, two of the questions in Chinese, and
no answer is padded with sentences of passages that do not hold the question's words."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from llama_index_convrag.cli import main
from llama_index_convrag.text import terms

#: (question, a file that states the fact, the fact as the docs write it)
QUESTIONS: Tuple[Tuple[str, Tuple[str, ...], str], ...] = (
    ("Which address does convrag serve bind by default?", ("SERVE.md", "WEB.md"), "127.0.0.1:8000"),
    ("What is the default timeout per LLM request in seconds?", ("GUIDE.md",), "300"),
    ("Under how many pixels wide is the chat page one column?", ("WEB.md",), "760 px"),
    ("What is the default of --max-upload-bytes?", ("SERVE.md",), "20 MiB"),
    ("How long did the failing insert onto a full disk take with timeout=5?", ("extractive.md",), "6.7 s"),
    # results/variants.md (the int8 variant's page) describes the default model and its variants too
    ("Which embedding model runs on ONNX Runtime by default?", ("GUIDE.md", "RESULTS.md", "variants.md"),
     "all-MiniLM-L6-v2"),
    ("convrag serve 默认绑定哪个地址？", ("SERVE.md", "WEB.md"), "127.0.0.1:8000"),
    ("--max-tokens 的默认值是多少？", ("GUIDE.md",), "512"),
)


@pytest.fixture(scope="module")
def answers(repository_docs: Tuple[Path, str]) -> List[Dict[str, Any]]:
    """Each question asked once, in its own conversation, over the collection of ``docs/``."""
    docs, uri = repository_docs
    out = []
    for question, _, _ in QUESTIONS:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = main(["ask", str(docs), question, "--uri", uri, "--json"])
        assert code == 0, buffer.getvalue()[-2000:]
        out.append(json.loads(buffer.getvalue())["turns"][0])
    return out


@pytest.mark.parametrize("index", range(len(QUESTIONS)))
def test_the_right_file_is_first_and_the_answer_holds_the_fact(answers: List[Dict[str, Any]], index: int) -> None:
    question, files, fact = QUESTIONS[index]
    turn = answers[index]
    assert turn["citations"][0]["file"] in files, (question, turn["citations"][0]["file"])
    assert fact in turn["answer"], (question, turn["answer"])
    # no padding: each run of sentences quoted from one passage shares a content term with the question
    runs = re.findall(r"(.*?) \[\d+\](?: |$)", turn["answer"], flags=re.S)
    asked = set(terms(question))
    assert runs and all(asked & set(terms(run)) for run in runs), (question, turn["answer"])
