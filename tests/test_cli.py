"""The ``convrag`` command line: ``main(argv)`` in-process (real Milvus Lite, real local model, the local
OpenAI-compatible server for the LLM path) plus one subprocess run of ``python -m llama_index_convrag.cli``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from PIL import Image

from llama_index_convrag.chat import TurnRecord
from llama_index_convrag.cli import main
from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.milvus.schema import create_collection, default_spec
from llama_index_convrag.storage.conversation import SQLiteConversationStore

REPO = Path(__file__).resolve().parents[1]
DOCS = {
    "milvus.md": "# Milvus\nMilvus Lite stores vectors in a single local file. Hybrid search combines dense "
                 "vectors with BM25 sparse vectors and fuses them with reciprocal rank fusion.",
    "bread.txt": "Sourdough bread needs a starter of flour and water. Bake the loaf at 230 degrees for forty "
                 "minutes until the crust is dark.",
    "tea.txt": "Green tea should steep for two minutes in water at eighty degrees. Black tea takes boiling water.",
}


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CONVRAG_LLM_MODEL", "CONVRAG_EMBED_MODEL",
                 "CONVRAG_MILVUS_URI"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def where(milvus_target: MilvusTarget, collection_name: str, tmp_path: Path) -> List[str]:
    """The session Milvus Lite file (shared with the other tests' client), a fresh collection, a private store."""
    return ["--uri", milvus_target.uri, "--collection", collection_name]


def run(capsys: pytest.CaptureFixture, argv: List[str]) -> Any:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture, argv: List[str]) -> Dict[str, Any]:
    code, out, err = run(capsys, [*argv, "--json"])
    assert code == 0, err
    return json.loads(out)


# --- help and usage ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [[], ["ingest"], ["ask"], ["chat"], ["eval"], ["eval", "retrieval"],
                                  ["eval", "conversation"], ["docs"], ["docs", "list"], ["docs", "remove"],
                                  ["conversations"], ["conversations", "list"], ["conversations", "export"], ["bench"], ["bench", "embed"], ["bench", "list"]])
def test_help_has_examples_and_exit_codes(capsys, argv):
    code, out, _ = run(capsys, [*argv, "--help"])
    assert code == 0
    assert "examples:" in out and "exit codes:" in out and "6  collection built with a different" in out


def test_bad_search_type_is_usage_error_naming_accepted_values(capsys, docs, where):
    code, out, err = run(capsys, ["ask", str(docs), "q", "--search-type", "fuzzy", *where])
    assert code == 2 and out == ""
    assert "invalid choice: 'fuzzy'" in err and "'dense', 'sparse', 'hybrid'" in err


# --- ingest ------------------------------------------------------------------------------------------------
def test_ingest_json_then_unchanged(capsys, docs, where):
    first = run_json(capsys, ["ingest", str(docs), *where])
    assert sorted(Path(p).name for p in first["added"]) == sorted(DOCS)
    assert first["chunks"] == 3 and first["unchanged"] == []
    code, out, err = run(capsys, ["ingest", str(docs), *where])
    assert code == 0 and err == ""
    assert out.startswith(f"collection {where[-1]}: 0 added, 0 updated, 3 unchanged")


def test_ingest_quiet_prints_nothing(capsys, docs, where):
    assert run(capsys, ["ingest", str(docs), "-q", *where]) == (0, "", "")


def test_missing_path_exit_3(capsys, tmp_path, where):
    code, out, err = run(capsys, ["ingest", str(tmp_path / "nope"), *where])
    assert code == 3 and out == ""
    assert err == f"convrag: error: no such file or folder: {str(tmp_path / 'nope')!r}\n"


def test_empty_folder_exit_3(capsys, tmp_path, where):
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, ["ask", str(tmp_path / "empty"), "q", *where])
    assert code == 3 and "no files under" in err and "empty folder" in err


@pytest.mark.parametrize("argv", [["chat", "{folder}"], ["ingest", "{folder}"], ["ask", "{folder}", "q"]])
@pytest.mark.parametrize("content", [None, "a.xyz"])
def test_nothing_is_created_when_nothing_can_be_ingested(capsys, tmp_path, monkeypatch, argv, content):
    """No convrag.db, no log, no conversation store is left behind by a run that cannot ingest anything."""
    folder = tmp_path / "in"
    folder.mkdir()
    if content is not None:
        (folder / content).write_bytes(b"\x00\x01")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, _, err = run(capsys, [a.replace("{folder}", str(folder)) for a in argv])
    assert code == 3, err
    assert sorted(p.name for p in work.iterdir()) == []


def test_no_supported_files_exit_3(capsys, tmp_path, where):
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "a.xyz").write_bytes(b"\x00\x01")
    code, _, err = run(capsys, ["ingest", str(folder), *where])
    assert code == 3 and "no supported files among 1" in err and "'.xyz'" in err and ".txt" in err


def test_unreachable_milvus_exit_4(capsys, docs):
    code, _, err = run(capsys, ["ingest", str(docs), "--uri", "http://127.0.0.1:9"])
    assert code == 4
    assert err.startswith("convrag: error: cannot connect to Milvus at 'http://127.0.0.1:9'")
    assert err.count("\n") == 1


def test_lite_file_in_missing_folder_exit_4(capsys, docs, tmp_path):
    code, _, err = run(capsys, ["ingest", str(docs), "--uri", str(tmp_path / "no" / "x.db")])
    assert code == 4 and "does not exist" in err


def test_model_without_key_or_url_exit_5(capsys, docs, where):
    code, out, err = run(capsys, ["ask", str(docs), "q", "--model", "gpt-x", *where])
    assert code == 5 and out == ""
    assert "--model 'gpt-x' needs an LLM endpoint" in err and "OPENAI_API_KEY" in err


def test_dimension_mismatch_exit_6(capsys, docs, where, milvus_client):
    create_collection(milvus_client, where[-1], default_spec(8))
    code, _, err = run(capsys, ["ask", str(docs), "q", *where])
    assert code == 6
    assert f"collection {where[-1]!r} holds 8-d vectors" in err and "makes 384-d ones" in err
    assert "--collection" in err and "re-ingest" in err
    assert milvus_client.get_collection_stats(where[-1])["row_count"] == 0  # nothing was written


def test_chat_without_path_needs_collection_exit_3(capsys, where):
    code, _, err = run(capsys, ["chat", *where])
    assert code == 3 and f"collection {where[-1]!r} does not exist" in err


# --- ask / chat without an LLM -----------------------------------------------------------------------------
def test_ask_retrieval_only_follow_up_contextual_and_store(capsys, docs, where, tmp_path):
    store = tmp_path / "chats.db"
    data = run_json(capsys, ["ask", str(docs), "How long should green tea steep?",
                             "--follow-up", "And what about it with black leaves?", "--top-k", "2",
                             "--store", str(store), *where])
    assert data["mode"] == "retrieval-only" and len(data["ingest"]["added"]) == 3
    first, second = data["turns"]
    assert first["retrieval_query"] == "How long should green tea steep?"
    assert second["retrieval_query"] == "And what about it with black leaves? green tea steep"
    assert first["rewrite"] == "none (no history)" and second["rewrite"] == "contextual"
    explained = second["rewrite_explanation"]
    assert (explained["reason"], explained["weights"]) == (
        "needs context (pronoun 'it'); 2 own content term(s): expansion weight 1.00", {"question": 1.0, "context": 1.0})
    assert [(a["term"], a["reason"]) for a in explained["added_terms"]] == [
        (t, "content word in the question 1 turn(s) back") for t in ("green", "steep", "tea")]
    assert first["conversation_id"] == second["conversation_id"]
    assert [c["marker"] for c in first["citations"]] == [1, 2]
    assert first["citations"][0]["file"] == "tea.txt" and first["citations"][0]["chunk"] == 0
    assert "Green tea should steep for two minutes in water at eighty degrees." in first["answer"]
    assert first["citations"][0]["cited_as"] is not None and first["sources"][0].endswith("docs/tea.txt")
    reopened = SQLiteConversationStore(store)
    messages = reopened.get_conversation(first["conversation_id"])
    assert [(m.role, m.status) for m in messages] == [("user", "complete"), ("assistant", "complete")] * 2
    assert messages[2].content == "And what about it with black leaves?"  # stored as typed, not the rewrite
    assert messages[3].content == second["answer"]
    cites = reopened.get_citations(second["message_id"])
    cited = {c["node_id"]: c["cited_as"] for c in second["citations"] if c["cited_as"] is not None}
    assert cites and {c.node_id: c.marker for c in cites} == cited
    record = TurnRecord.from_dict(reopened.get_turn_record(second["message_id"]))  # the engine's own record
    assert (record.rewrite_strategy, record.rewrite_used_llm) == ("contextual", False)
    assert record.rewrite_explanation == explained
    assert record.retrieval_query == second["retrieval_query"] and record.answer == second["answer"]
    reopened.close()


def test_ask_text_output(capsys, docs, where, tmp_path):
    code, out, err = run(capsys, ["ask", str(docs), "How do I bake sourdough?", "--top-k", "1",
                                  "--search-type", "dense", "--store", str(tmp_path / "c.db"), *where])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "query> How do I bake sourdough?"
    assert lines[1].startswith("answer> ") and "Bake the loaf at 230 degrees for forty minutes" in lines[1]
    assert lines[2].startswith("(retrieval only: extractive answer, no LLM configured")
    assert lines[3].startswith("[1] bread.txt:0 0.") and lines[3].endswith(" (cited)")
    assert lines[4] == "scores: [n] is the rank; score = cosine similarity of query and passage (-1 to 1, higher is closer)"
    assert lines[5] == f"sources: {docs.resolve() / 'bread.txt'}"
    assert "mode: retrieval-only" in err and "ingest: 3 added" in err


def test_default_store_is_next_to_the_milvus_file(capsys, docs, tmp_path):
    uri = tmp_path / "own" / "m.db"
    uri.parent.mkdir()
    assert run(capsys, ["ask", str(docs), "tea?", "-q", "--uri", str(uri)])[0] == 0
    assert (uri.parent / "convrag_chats.db").is_file()


def test_chat_reads_stdin_lines_and_reset(capsys, docs, where, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("How long should green tea steep?\n\nAnd with it black?\n"
                                                  "/reset\nAnd with it black?\n"))
    data = run_json(capsys, ["chat", str(docs), "--store", str(tmp_path / "c.db"), *where])
    queries = [t["retrieval_query"] for t in data["turns"]]
    assert queries == ["How long should green tea steep?", "And with it black? green tea steep", "And with it black?"]
    ids = [t["conversation_id"] for t in data["turns"]]
    assert ids[0] == ids[1] != ids[2]


def test_chat_subprocess_stdin(docs, tmp_path):
    """The installed-style entry, its own Milvus Lite file (one process per file)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CONVRAG_MILVUS_URI"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "llama_index_convrag.cli", "chat", str(docs), "--top-k", "1",
                           "--uri", str(tmp_path / "sub.db")], input="How do I bake bread?\nWhat about it?\n",
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("query> ") == 2
    assert "query> What about it? bake bread" in proc.stdout
    assert proc.stdout.count("[1] bread.txt:0") == 2  # top-1 of the fused list, not a tie-break on 1-node lists
    assert "tantivy" not in proc.stderr and "pkg_resources" not in proc.stderr


# --- with an LLM (OpenAI HTTP path through the local server) -----------------------------------------------
def _responder(body: Dict[str, Any]) -> Dict[str, Any]:
    text = body["messages"][-1]["content"]
    if "<Standalone question>" in text:
        return {"content": "How long should black tea steep?"}
    return {"content": "Steep it for two minutes [1]."}


def _chat_bodies(server: Any) -> List[str]:
    return [r.body["messages"][-1]["content"] for r in server.requests if r.path.endswith("/chat/completions")]


def test_ask_with_llm_through_openai_server(capsys, docs, where, tmp_path, openai_server):
    openai_server.chat_responder = _responder
    data = run_json(capsys, ["ask", str(docs), "How long should green tea steep?", "--follow-up",
                             "And what about it for black?", "--top-k", "2", "--store", str(tmp_path / "c.db"),
                             "--base-url", openai_server.base_url, "--model", "x", *where])
    assert data["mode"] == "llm"
    first, second = data["turns"]
    assert first["answer"] == second["answer"] == "Steep it for two minutes [1]."
    assert first["retrieval_query"] == "How long should green tea steep?"
    assert second["retrieval_query"] == "How long should black tea steep?"
    assert first["citations"][0]["file"] == "tea.txt" and first["citations"][0]["cited_as"] == 1
    bodies = _chat_bodies(openai_server)
    assert len(bodies) == 3  # answer, condense, answer
    assert "<Standalone question>" in bodies[1] and "And what about it for black?" in bodies[1]
    assert "How long should black tea steep?" in bodies[2] and "Green tea should steep" in bodies[2]


@pytest.mark.parametrize("extra, code, message", [
    (["--base-url", "http://127.0.0.1:1/v1"], 2, "--gguf serves its own model; drop --base-url / --model"),
    (["--model", "m"], 2, "--gguf serves its own model; drop --base-url / --model"),
])
def test_gguf_with_another_llm_option_is_usage_error(capsys, docs, where, tmp_path, extra, code, message):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    got, out, err = run(capsys, ["ask", str(docs), "q", "--gguf", str(model), *extra, *where])
    assert (got, out, err.splitlines()[-1]) == (code, "", f"convrag: error: {message}")


def test_gguf_missing_file_exit_3(capsys, docs, where, tmp_path):
    code, _, err = run(capsys, ["ask", str(docs), "q", "--gguf", str(tmp_path / "none.gguf"), *where])
    assert code == 3 and f"GGUF model file not found: {str(tmp_path / 'none.gguf')!r}" in err


def test_gguf_without_the_llamacpp_runtime_exit_5(capsys, docs, where, tmp_path, monkeypatch):
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is not None:
        pytest.skip("llama-cpp-python is installed in this environment")
    monkeypatch.setenv("CONVRAG_REAL_LLM_CACHE", str(tmp_path / "empty_cache"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    code, out, err = run(capsys, ["ask", str(docs), "q", "--gguf", str(model), *where])
    assert (code, out) == (5, "")
    assert err.splitlines()[-1] == (f"convrag: error: --gguf needs llama-cpp-python's server, which {sys.executable} "
                                    f"cannot import: pip install 'llama-index-convrag[llamacpp]'")


def test_chat_streams_with_llm(capsys, docs, where, tmp_path, openai_server, monkeypatch):
    openai_server.chat_responder = _responder
    monkeypatch.setattr(sys, "stdin", io.StringIO("How long should green tea steep?\n"))
    code, out, err = run(capsys, ["chat", str(docs), "--top-k", "1", "--store", str(tmp_path / "c.db"),
                                  "--base-url", openai_server.base_url, "--model", "x", *where])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == ["query> How long should green tea steep?", "answer> Steep it for two minutes [1]."]
    assert lines[2].startswith("[1] tea.txt:0 ") and lines[2].endswith(" (cited)")
    assert any(r.body.get("stream") for r in openai_server.requests)


def test_llm_server_refusing_exit_5(capsys, docs, where, tmp_path, openai_server):
    openai_server.fail_next(401)
    code, _, err = run(capsys, ["ask", str(docs), "tea?", "--store", str(tmp_path / "c.db"),
                                "--base-url", openai_server.base_url, "--model", "x", *where])
    assert code == 5
    assert err.splitlines()[-1].startswith("convrag: error: the LLM server refused the API key: Error code: 401")


# --- bench -------------------------------------------------------------------------------------------------
def test_bench_list_from_checkout(capsys, monkeypatch):
    monkeypatch.chdir(REPO / "bench")
    data = run_json(capsys, ["bench", "list"])
    scripts = {r["script"]: r for r in data["scripts"]}
    assert "bench/retrieval_quality.py" in scripts and "bench/_data.py" not in scripts
    assert scripts["bench/retrieval_quality.py"]["command"] == "PYTHONPATH=. python bench/retrieval_quality.py"


def test_bench_list_outside_checkout_exit_3(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, ["bench", "list"])
    assert code == 3 and "source checkout" in err


def test_bench_embed_json(capsys):
    data = run_json(capsys, ["bench", "embed", "--passages", "4", "--queries", "3", "--words", "20"])
    assert data["passages"] == 4 and data["queries"] == 3 and data["passages_per_second"] > 0
    assert 0 < data["query_p50_ms"] <= data["query_p95_ms"]


def test_ask_names_the_files_it_skipped(capsys, docs, where, tmp_path):
    (docs / "diagram.png").write_bytes(b"\x89PNG")
    code, out, err = run(capsys, ["ask", str(docs), "How do I bake sourdough?", "--top-k", "1",
                                  "--store", str(tmp_path / "c.db"), *where])
    assert code == 0, err
    assert "1 unsupported, 0 failed" in err and "  unsupported diagram.png: no reader for '.png'" in err


# --- validation before any I/O (issue 14) ------------------------------------------------------------------
@pytest.mark.parametrize("argv,message", [
    (["ask", "{docs}", ""], "the question is blank"),
    (["ask", "{docs}", "   \n\t"], "the question is blank"),
    (["ask", "{docs}", "What is Milvus?", "--follow-up", ""], "the question is blank"),
])
def test_blank_questions_are_usage_errors(capsys, docs, where, argv, message):
    code, out, err = run(capsys, [a.replace("{docs}", str(docs)) for a in argv] + where)
    assert code == 2 and out == "" and message in err


def test_over_long_question_exit_7_names_limit_and_size(capsys, docs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, ["ask", str(docs), "x" * 50_000])
    assert code == 7 and out == ""
    assert err == ("convrag: error: the question is 50,000 characters; the limit is 4,000 "
                   "(put long text in a file and ingest it)\n")
    assert not (tmp_path / "convrag.db").exists()  # refused before any I/O
    code, _, err = run(capsys, ["ask", str(docs), "ok", "--follow-up", "y" * 4001])
    assert code == 7 and "the follow-up is 4,001 characters" in err


def test_errors_under_json_are_json_objects(capsys, tmp_path):
    code, out, err = run(capsys, ["ingest", str(tmp_path / "nope"), "--json"])
    assert code == 3
    assert json.loads(out) == {"error": {"exit_code": 3, "type": "error",
                                         "message": f"no such file or folder: {str(tmp_path / 'nope')!r}"}}
    assert err.startswith("convrag: error: no such file")
    code, out, _ = run(capsys, ["ask", str(tmp_path), "", "--json"])
    assert code == 2 and json.loads(out)["error"]["exit_code"] == 2


def test_help_top_line_has_no_markup(capsys):
    code, out, _ = run(capsys, ["--help"])
    assert code == 0
    description = out.split("\n\n")[1]
    assert description.startswith("convrag: ingest folders into Milvus") and "`" not in description


def test_unchanged_means_the_same_in_json_and_text(capsys, docs, where):
    """`unchanged` counts files stored with the same content; files not ingested are `unsupported`/`failed`."""
    (docs / "x.png").write_bytes(b"\x89PNG")
    run_json(capsys, ["ingest", str(docs), *where])
    data = run_json(capsys, ["ingest", str(docs), *where])
    assert len(data["unchanged"]) == 3 and [Path(p["path"]).name for p in data["unsupported"]] == ["x.png"]
    assert "skipped" not in data
    code, out, _ = run(capsys, ["ingest", str(docs), *where])
    assert out.startswith(f"collection {where[-1]}: 0 added, 0 updated, 3 unchanged, 0 deleted, 1 unsupported")
    assert "  unsupported: " in out and "x.png (no reader for '.png'" in out


def test_binary_txt_is_listed_as_unsupported_not_embedded(capsys, docs, where):
    (docs / "binary.txt").write_bytes(Path(sys.executable).resolve().read_bytes()[:20000])
    data = run_json(capsys, ["ingest", str(docs), *where])
    assert data["chunks"] == 3
    (entry,) = data["unsupported"]
    assert entry["path"].endswith("binary.txt") and entry["reason"].startswith("binary file: 'binary.txt' has a NUL")


def test_hybrid_weighted_score_is_explained_and_turns_are_timed(capsys, docs, where, tmp_path):
    code, out, err = run(capsys, ["ask", str(docs), "How do I bake sourdough?", "--top-k", "2",
                                  "--store", str(tmp_path / "c.db"), *where])
    assert code == 0, err
    assert "scores: [n] is the rank; score = weighted mean of the dense, dense-feedback and BM25 scores " \
           "(0.25/0.25/0.5), each min-max normalised per query: 1.0 is the best passage of this query, not a " \
           "perfect match" in out.splitlines()
    data = run_json(capsys, ["ask", str(docs), "How do I bake sourdough?", "--follow-up", "And tea?",
                             "--store", str(tmp_path / "c.db"), *where])
    base = ("weighted mean of the dense, dense-feedback and BM25 scores (0.25/0.25/0.5), each min-max normalised "
            "per query: 1.0 is the best passage of this query, not a perfect match")
    first, follow = data["turns"]
    for turn in data["turns"]:
        assert isinstance(turn["seconds"], float) and turn["seconds"] >= 0 and turn["rewrite_ms"] >= 0
    assert first["scores"] == f"[n] is the rank; score = {base}"
    fusion = follow["rewrite_explanation"]["fusion"]  # "And tea?" is expanded with "bake sourdough" and fused
    own, ctx = fusion["question"], fusion["context"]
    fused_lists = ("weighted mean of the dense and BM25 scores (0.5/0.5), each min-max normalised per query: 1.0 is "
                   "the best passage of this query, not a perfect match")  # the fused searches skip dense feedback
    assert follow["scores"] == (f"[n] is the rank; score = ({own:.3g} x the question's own list + {ctx:.3g} x the "
                                f"history-expanded query's list) / {own + ctx:.3g}, each list min-max normalised over "
                                f"its top 50 (0 to 1: 1.0 is the best of both lists, not a perfect match); within "
                                f"each list: {fused_lists}")
    assert max(c["score"] for c in follow["citations"]) <= 1.0 + 1e-9  # the line's scale: the weights' sum divides


def test_a_fused_scores_line_says_how_much_the_two_lists_agreed():
    from llama_index_convrag.cli_commands.conversation import SCORES_PREFIX, fused_meaning

    line = fused_meaning(SCORES_PREFIX + "within", {"question": 1.0, "context": 0.0, "agreement": 0.8123})
    assert line == (f"{SCORES_PREFIX}(1 x the question's own list + 0 x the history-expanded query's list) / 1, each "
                    "list min-max normalised over its top 50 (0 to 1: 1.0 is the best of both lists, not a perfect "
                    "match); the expanded list weighs less the "
                    "more the two lists' first results agree beyond chance (here 0.81; 0.65 or more: weight 0); "
                    "within each list: within")
    assert "agree" not in fused_meaning(SCORES_PREFIX + "x", {"question": 1.0, "context": 2.0, "agreement": None})


def test_refused_llm_connection_fails_fast_exit_5(capsys, docs, where, tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, err = run(capsys, ["ask", str(docs), "tea?", "--base-url", f"http://127.0.0.1:{port}/v1",
                                  "--store", str(tmp_path / "c.db"), *where])
    assert code == 5 and out == ""
    assert err == (f"convrag: error: cannot reach the LLM server at 'http://127.0.0.1:{port}/v1': connection refused "
                   f"(is the server running?)\n")
    assert not (tmp_path / "c.db").exists()  # refused before ingesting or opening anything


def test_analyzer_choices_are_the_schema_analyzers():
    from llama_index_convrag.cli import ANALYZER_CHOICES
    from llama_index_convrag.milvus.schema import ANALYZERS

    assert ANALYZER_CHOICES == tuple(sorted(ANALYZERS))


def test_ctrl_c_during_ingest_exit_130_says_what_was_kept_and_rerun_resumes(capsys, docs, where, monkeypatch,
                                                                             embed_model):
    """Issue 14: SIGINT mid-ingest stops at the next embedding run, says what was kept, exit 130; re-run resumes."""
    from llama_index_convrag.cli_commands import ingest as ingest_cmd
    from tests.ingest.test_pipeline import SigintAtCall

    (docs / "more.txt").write_text("Oolong tea is partly oxidised and steeps for three minutes.")
    interrupting = SigintAtCall(embed_model, 1)
    monkeypatch.setattr(ingest_cmd, "embed_model", lambda: interrupting)
    code, out, err = run(capsys, ["ingest", str(docs), "--json", *where])
    assert code == 130 and interrupting.calls == 1  # no embedding run after the signal
    kept = json.loads(out)
    assert kept["interrupted"] is True and "convrag: interrupted\n" in err
    assert "re-run the same command to resume" in err
    monkeypatch.undo()
    monkeypatch.setattr(ingest_cmd, "embed_model", lambda: embed_model)
    resumed = run_json(capsys, ["ingest", str(docs), *where])
    assert sorted(resumed["unchanged"]) == sorted(kept["added"]) and len(kept["added"]) < 4
    assert len(resumed["added"]) + len(resumed["updated"]) + len(resumed["unchanged"]) == 4


def test_corrupt_pdf_without_the_docs_extra_says_what_to_install(capsys, tmp_path, where, monkeypatch):
    """Issue 14: a corrupt .pdf with the README's [local] install (no pypdf) names the docs extra, not 'unsupported:
    ... supported: ... .pdf'."""
    monkeypatch.setitem(sys.modules, "pypdf", None)
    folder = tmp_path / "pdfs"
    folder.mkdir()
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 corrupt")
    code, _, err = run(capsys, ["ingest", str(folder), *where])
    assert code == 3
    assert 'broken.pdf: PDF support needs the docs extra (pypdf): pip install "llama-index-convrag[docs]"' in err


def test_progress_lines_when_stderr_is_not_a_terminal(capsys, docs, where, monkeypatch):
    """Issue 14: a 20 MB file with stderr in a log printed nothing for 29 minutes; now a line every interval."""
    from llama_index_convrag.cli_commands import ingest as ingest_cmd

    monkeypatch.setattr(ingest_cmd, "PROGRESS_LINE_SECONDS", 1e-9)
    code, _, err = run(capsys, ["ingest", str(docs), *where])
    assert code == 0
    lines = [line for line in err.splitlines() if line.startswith("ingest: ")]
    assert lines and lines[-1].startswith("ingest: 3/3 files read, 3 chunks stored (")
    assert "\r" not in err  # no terminal bar redrawing in a log
    code, _, err = run(capsys, ["ingest", str(docs), "-q", *where])
    assert code == 0 and "ingest: " not in err
