"""A real model's limits on every route: Qwen2.5-0.5B behind llama-cpp-python's server (n_ctx 4096), reached as a
user reaches it, through ``--base-url``.

llama-cpp-python's server states its window nowhere (no ``/props``, nothing in ``/v1/models``), so the window is
set by option or environment here; what the model writes is its own, so only the shape of each outcome is asserted.
"""

import io
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, List

import pytest

from llama_index_convrag.cli import main
from llama_index_convrag.cli_commands.common import EXIT_LLM
from llama_index_convrag.chat import RewriteOptions
from llama_index_convrag.cli_commands.conversation import RERANK_FAILED, llm_failure
from llama_index_convrag.config import OpenAICompatible
from llama_index_convrag.config.model_limits import ServerLimits, probe_server
from llama_index_convrag.judge import JudgeOptions, JudgeQueryEngine, SearchLimits
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from llama_index_convrag.testing.real_llm import start_server
from tests.chat.conftest import index, retriever, store  # noqa: F401 - fixtures
from tests.cli_commands.test_conversation_limits import write_docs

pytestmark = pytest.mark.real_llm

QUESTION = "How hot should the water be for green tea?"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """Eight passages of about 450 tokens each: ``--top-k 8`` is past a 4,096-token window without the budget."""
    return write_docs(tmp_path / "docs", lambda t, i, j: f"For {t}, note {j}: steep the leaves in water at {70 + j} "
                                                         f"degrees.", 30)


@pytest.fixture
def cli(real_llm_server: Any, milvus_target: Any, collection_name: str, tmp_path: Path) -> List[str]:
    """The server, and a timeout for a loaded 2-core machine (an 8-passage prompt takes minutes there)."""
    return ["--base-url", real_llm_server.base_url, "--model", real_llm_server.model_alias, "--uri",
            milvus_target.uri, "--collection", collection_name, "--store", str(tmp_path / "c.db"),
            "--llm-timeout", "1500"]


def run_json(capsys: pytest.CaptureFixture, argv: List[str]) -> Any:
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def stored_statuses(tmp_path: Path) -> List[str]:
    store = SQLiteConversationStore(tmp_path / "c.db")
    try:
        return [m.status for cid in store.list_conversations() for m in store.get_conversation(cid)
                if m.role == "assistant"]
    finally:
        store.close()


def test_the_server_states_no_window_so_the_default_applies(real_llm_server) -> None:
    assert probe_server(real_llm_server.base_url, real_llm_server.model_alias) == ServerLimits()


#: A loaded 2-core machine reads a 2,000-token prompt in minutes.
SLOW = pytest.mark.timeout(1500)


@SLOW
def test_top_k_8_fits_the_window_set_in_the_environment(capsys, docs, cli, monkeypatch) -> None:
    """Half the served window is declared (a smaller window is always safe): the eight passages (about 4,200 tokens)
    must be trimmed to fit it, and the prompt the server reads stays short enough for a loaded machine."""
    monkeypatch.setenv("CONVRAG_LLM_CONTEXT_WINDOW", "2048")
    code, data, err = run_json(capsys, ["ask", str(docs), QUESTION, "--top-k", "8", "--max-tokens", "48", *cli])
    assert "llm_limits" in data, err
    assert data["llm_limits"]["sources"]["context_window"] == "env CONVRAG_LLM_CONTEXT_WINDOW"
    turn = data["turns"][0]
    assert "HTTP 400" not in err and "maximum context length" not in err
    assert turn["status"] in ("complete", "error"), turn  # error only for the output limit, said so
    if turn["status"] == "error":
        assert "output limit (max_tokens=48)" in turn["error"] and code == EXIT_LLM
    else:
        assert code == 0, err


def test_the_same_turn_past_the_window_is_refused_by_the_server(capsys, docs, cli) -> None:
    """The check: with the window left at the default 8192, the server refuses the prompt (exit 5). Chunks are sized
    to the embedding window (about 250 tokens), so 20 passages are past the server's 4,096 and within 8,192: the
    top-k 20 passages are read (widened, then cut back to their hits by the budget where the 8,192 is short)."""
    code = main(["ask", str(docs), QUESTION, "--top-k", "20", "--max-tokens", "48", *cli])
    err = capsys.readouterr().err
    assert code == EXIT_LLM and "maximum context length is 4096 tokens" in err, err


def test_an_answer_cut_at_max_tokens_is_stored_as_error(capsys, docs, cli, tmp_path) -> None:
    code, data, err = run_json(capsys, ["ask", str(docs), "Describe every tea in detail.", "--top-k", "2",
                                        "--max-tokens", "4", "--context-window", "4096", *cli])
    turn = data["turns"][0]
    assert code == EXIT_LLM, err
    assert turn["status"] == "error" and "the model stopped at its output limit (max_tokens=4)" in turn["error"]
    assert turn["answer"].strip()  # the partial text is kept
    assert stored_statuses(tmp_path) == ["error"]


def test_a_stalled_request_times_out_with_the_limit_named(capsys, docs, cli, tmp_path) -> None:
    code = main(["ask", str(docs), QUESTION, "--top-k", "4", "--context-window", "4096", *cli, "--llm-timeout", "0.2"])
    err = capsys.readouterr().err
    assert code == EXIT_LLM
    assert "the LLM server did not answer in time (timeout 0.2 s" in err
    assert stored_statuses(tmp_path) == ["error"]


@SLOW
def test_llm_rerank_fits_the_window_or_says_it_failed(capsys, docs, cli) -> None:
    code, data, err = run_json(capsys, ["ask", str(docs), QUESTION, "--top-k", "8", "--rerank", "llm",
                                        "--max-tokens", "48", "--context-window", "2048", *cli])
    turn = data["turns"][0]
    assert not any("400" in w for w in turn["warnings"]), turn["warnings"]  # the prompt fitted
    if turn["warnings"]:  # the 0.5B model's reply could not be read: said, and the scores line tells the truth
        assert turn["warnings"][0].startswith("rerank failed") and turn["scores"].endswith(RERANK_FAILED)
    else:
        assert "reranker: the LLM's relevance grade" in turn["scores"]


def test_no_citations_on_the_command_line(capsys, docs, cli) -> None:
    # the two hits as they are (--no-widen): a short prompt, read within the default timeout on a loaded machine
    code, data, err = run_json(capsys, ["ask", str(docs), QUESTION, "--top-k", "2", "--no-widen", "--no-citations",
                                        "--max-tokens", "48", "--context-window", "4096", *cli])
    turn = data["turns"][0]
    assert code in (0, EXIT_LLM), err
    assert all(c["cited_as"] is None for c in turn["citations"])


@SLOW
def test_the_judge_grading_everything_0_says_so(real_llm, retriever) -> None:  # noqa: F811
    response = JudgeQueryEngine.from_defaults(retriever, llm=real_llm, judge=JudgeOptions(
        limits=SearchLimits(max_depth=1))).query("Who directed Inception?")
    tree = response.metadata["judge_tree"]
    if not any(c.kept for c in tree.root.chunks):
        assert response.response.startswith("the judge found no relevant passage: it graded ")
    assert response.response != "Empty Response"


@SLOW
def test_a_server_killed_mid_stream_is_an_llm_failure_and_the_store_is_right(real_llm_setup, retriever,  # noqa: F811
                                                                             store) -> None:  # noqa: F811
    from llama_index_convrag.chat import ConvRAGChatEngine

    server = start_server(real_llm_setup)
    try:
        llm = OpenAICompatible(**server.client_kwargs(max_tokens=1000, timeout=60.0))
        engine = ConvRAGChatEngine.from_defaults(retriever, llm, conversation_store=store,
                                                 rewrite=RewriteOptions(strategy="none"))
        response = engine.stream_chat("Tell me everything about Christopher Nolan's films.")
        deltas = iter(response.response_gen)
        first = next(deltas)
        os.kill(server._process.pid, signal.SIGKILL)  # the server dies while the answer streams
        with pytest.raises(Exception) as caught:
            for _ in deltas:
                pass
    finally:
        server.stop()
    mapped = llm_failure(caught.value, 60.0)
    assert mapped is not None and mapped.code == EXIT_LLM, repr(caught.value)
    messages = store.get_conversation(engine.conversation_id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[0].content == "Tell me everything about Christopher Nolan's films."
    assert messages[1].status == "error" and messages[1].content.startswith(first)


@SLOW
def test_chat_goes_on_after_a_failed_question(capsys, docs, cli, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{QUESTION}\nWhat about black tea?\n"))
    code = main(["chat", str(docs), "--top-k", "2", "--max-tokens", "1", "--context-window", "4096",
                 "--rewrite-strategy", "none", *cli])
    out, err = capsys.readouterr()
    assert code == EXIT_LLM
    assert out.count("answer> ") == 2  # both questions ran
    assert stored_statuses(tmp_path) == ["error", "error"]  # both cut at 1 token (any answer is), both said
    assert err.count("output limit (max_tokens=1)") == 2
