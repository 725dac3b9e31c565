"""The README's Python quick start runs as written, through the real OpenAI client against the local server."""

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


#: The part of docs/ the quick start ingests here: the guide its first question is about, a small page, and a page in a
#: subfolder (the ingest walks folders). All of docs/ (about 10 times the text) is embedded once a run by the
#: ``repository_docs`` fixture, whose tests ask it questions; here it would only add embedding time.
QUICK_START_DOCS = ("GUIDE.md", "WEB.md", "results/conv.md", "results/web.md")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``docs/`` for the module: the first run of the quick start ingests it, a later run finds every file
    unchanged (the ingest is idempotent, as the block says), so the docs are embedded once."""
    folder = tmp_path_factory.mktemp("quick_start")
    for name in QUICK_START_DOCS:
        (folder / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "docs" / name, folder / "docs" / name)
    return folder


def python_blocks() -> list:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)


def test_quick_start_runs_against_an_openai_compatible_server(workdir, monkeypatch, openai_server, capsys):
    (block,) = python_blocks()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("CONVRAG_LLM_MODEL", "local-model")
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    markdown_files = len(list((workdir / "docs").rglob("*.md")))
    # every file added, or (the offline run came first in this module's folder) every file found unchanged
    assert (f"collection docs: {markdown_files} added, 0 updated, 0 unchanged" in out
            or f"collection docs: 0 added, 0 updated, {markdown_files} unchanged" in out), out[:400]
    assert "assistant message id:" in out
    chat_calls = [r for r in openai_server.requests if r.path == "/v1/chat/completions"]
    assert chat_calls and all(r.body["model"] == "local-model" for r in chat_calls)
    assert any(r.body.get("stream") for r in chat_calls)  # the streamed turn went over SSE
    engine, stream = namespace["engine"], namespace["stream"]
    stored = engine.store.get_citations(stream.message_id)
    assert stored and all(c.node_id for c in stored)
    assert namespace["r2"].metadata["generated_question"]


def test_quick_start_runs_offline_without_an_llm(workdir, monkeypatch, capsys):
    """No OPENAI_* variables, no server: the same block answers extractively."""
    (block,) = python_blocks()
    monkeypatch.chdir(workdir)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["llm"] is None and namespace["r1"].response.strip()
    assert namespace["engine"].store.get_citations(namespace["stream"].message_id)


def test_quick_start_offline_hint_is_importable():
    (block,) = python_blocks()
    (hint,) = [line.split("instead: ", 1)[1] for line in block.splitlines() if "ScriptedLLM" in line]
    namespace: dict = {}
    exec(hint, namespace)
    assert type(namespace["llm"]).__name__ == "ScriptedLLM"


def test_ci_runs_exactly_the_readme_test_command():
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    main_job, tests = (b.strip() for b in blocks[:2])
    assert "convrag chat docs/" in main_job and '".[local]"' in main_job
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert tests in ci_lines
