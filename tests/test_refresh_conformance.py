"""scripts/refresh_conformance.py's edits (the script itself needs the upstream source and is not run in CI)."""

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("refresh_conformance", ROOT / "scripts" / "refresh_conformance.py")
rc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rc)  # type: ignore[union-attr]


def test_synthesizer_imports_split_ours_from_cores():
    text = ("from llama_index.core.response_synthesizers import (\n    Refine,\n    ResponseMode,\n)\n"
            "from llama_index.core.response_synthesizers.refine import DefaultRefineProgram, Refine as R\n")
    assert rc.swap_synthesizer_imports(text) == (
        "from llama_index_convrag.synthesizers import Refine, ResponseMode\n"
        "from llama_index.core.response_synthesizers.refine import DefaultRefineProgram\n"
        "from llama_index_convrag.synthesizers import Refine as R\n")


def test_chat_engine_edit_swaps_the_class_and_adds_chat_mode_to_nested_calls():
    text = ("from llama_index.core.chat_engine.context import (\n    ContextChatEngine,\n)\n"
            "e = ContextChatEngine.from_defaults(\n    r, llm=MockLLM(), system_prompt=P\n)\n"
            "f = ContextChatEngine.from_defaults(r)\n")
    assert rc.engine_as("ContextChatEngine", "context", "context")(text) == (
        "from llama_index_convrag.chat import ConvRAGChatEngine\n"
        "e = ConvRAGChatEngine.from_defaults(\n    r, llm=MockLLM(), system_prompt=P, chat_mode='context'\n)\n"
        "f = ConvRAGChatEngine.from_defaults(r, chat_mode='context')\n")
    assert rc.engine_as("CondenseQuestionChatEngine", "condense_question", None)(
        "from llama_index.core.chat_engine.condense_question import CondenseQuestionChatEngine\n") == (
        "from llama_index_convrag.chat import ConvRAGChatEngine as CondenseQuestionChatEngine\n")


def test_source_mode_records_the_files_last_commit_and_writes_the_provenance_line(tmp_path):
    up = tmp_path / "up" / "llama-index-core" / "tests" / "chat_engine"
    up.mkdir(parents=True)
    (up / "test_context.py").write_text("from llama_index.core.chat_engine import ContextChatEngine\n"
                                        "x = ContextChatEngine.from_defaults(r)\n")
    git = ["git", "-C", str(tmp_path / "up"), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert rc.main(["--source", str(tmp_path / "up"), "--write", "--out", str(tmp_path / "out"),
                    "chat_engine/test_context.py"]) == 0
    assert (tmp_path / "out" / "chat_engine" / "test_context.py").read_text() == (
        f"# Ported from run-llama/llama_index llama-index-core/tests/chat_engine/test_context.py at {commit} "
        "(MIT, see README.md); edits: our engine import (and chat_mode).\n"
        "from llama_index_convrag.chat import ConvRAGChatEngine\n"
        "x = ConvRAGChatEngine.from_defaults(r, chat_mode='context')\n")
    with pytest.raises(SystemExit):
        rc.main(["--source", str(tmp_path / "up"), "chat_engine/nope.py"])
