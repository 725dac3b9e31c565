"""``convrag ask/chat`` engine options (issue 14 "Also"): response mode, reranker, filters, rewrite strategy, chat
mode and system prompt, conversation resume / list / export; real Milvus Lite, the real local model and the local
OpenAI-compatible server for the LLM path."""

import argparse
import io
import json
import re
import sys
from pathlib import Path

import pytest

from llama_index_convrag.chat import AnswerOptions, TurnRecord
from llama_index_convrag.cli import (CHAT_MODE_CHOICES, CITATION_MODE_CHOICES, RERANK_CHOICES,
                                     RESPONSE_MODE_CHOICES, REWRITE_STRATEGY_CHOICES, main)
from llama_index_convrag.cli_commands.engine_options import (NO_LLM_RESPONSE_MODES, NO_LLM_REWRITE_STRATEGIES,
                                                             RERANKERS, parse_filter)
from llama_index_convrag.postprocessors.widen import DEFAULT_WIDEN, WidenRules
from llama_index_convrag.storage.conversation import SQLiteConversationStore
from tests.test_cli import _no_llm_env, docs, run, run_json  # noqa: F401 - the CLI tests' fixtures and helpers


@pytest.fixture
def where(milvus_target, collection_name, tmp_path):
    return ["--uri", milvus_target.uri, "--collection", collection_name, "--store", str(tmp_path / "chats.db")]


# --- the choice lists are the library's ------------------------------------------------------------------
def test_choice_lists_are_the_engines_own():
    from llama_index_convrag.chat.defaults import CHAT_MODES, REWRITE_STRATEGIES
    from llama_index_convrag.synthesizers.registry import lookup_mode, registered_modes

    assert RESPONSE_MODE_CHOICES == tuple(registered_modes())
    assert set(NO_LLM_RESPONSE_MODES) == {m for m in registered_modes() if not lookup_mode(m).requires_llm}
    assert REWRITE_STRATEGY_CHOICES == REWRITE_STRATEGIES
    assert set(NO_LLM_REWRITE_STRATEGIES) == set(REWRITE_STRATEGIES) - {"llm"}
    assert CHAT_MODE_CHOICES == CHAT_MODES and RERANK_CHOICES == RERANKERS
    from llama_index_convrag.synthesizers.citations import CITATION_MODES

    assert CITATION_MODE_CHOICES == CITATION_MODES


@pytest.mark.parametrize("option, value, accepted", [
    ("--response-mode", "summary", RESPONSE_MODE_CHOICES),
    ("--rewrite-strategy", "magic", REWRITE_STRATEGY_CHOICES),
    ("--chat-mode", "react", CHAT_MODE_CHOICES),
    ("--rerank", "cohere", RERANK_CHOICES),
    ("--citation-mode", "after", CITATION_MODE_CHOICES),
])
def test_bad_values_exit_2_naming_the_accepted_ones(capsys, docs, where, option, value, accepted):
    code, out, err = run(capsys, ["ask", str(docs), "tea?", option, value, *where])
    assert code == 2 and out == ""
    assert f"argument {option}: invalid choice: '{value}'" in err and all(a in err for a in accepted)


# --- filters -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, parsed", [
    ("file_name=tea.txt", ("file_name", "==", "tea.txt")),
    ("file_name == tea.txt", ("file_name", "==", "tea.txt")),
    ("chunk>=2", ("chunk", ">=", 2)),
    ("chunk!=0", ("chunk", "!=", 0)),
    ('chunk="2"', ("chunk", "==", "2")),
    ("score<0.5", ("score", "<", 0.5)),
    ("draft=true", ("draft", "==", True)),
    ("title=a=b", ("title", "==", "a=b")),
])
def test_parse_filter(text, parsed):
    assert parse_filter(text) == parsed


@pytest.mark.parametrize("text, why", [
    ("tea.txt", "is not a condition"),
    ("file_name=", "is not a condition"),
    ("=tea.txt", "is not a condition"),
    ("chunk>two", "is not a number"),
    ("draft<true", "is not a number"),
])
def test_bad_filters_exit_2_before_any_io(capsys, tmp_path, text, why):
    db = tmp_path / "m.db"
    code, out, err = run(capsys, ["ask", str(tmp_path), "tea?", "--filter", text, "--uri", str(db)])
    assert code == 2 and why in err
    assert ("KEY=VALUE or KEY OP VALUE" in err) == (why == "is not a condition")
    assert not db.exists()


def test_filter_restricts_the_passages_to_matching_files(capsys, docs, where):
    data = run_json(capsys, ["ask", str(docs), "How long should green tea steep?", "--filter", "file_name=bread.txt",
                             *where])
    (turn,) = data["turns"]
    assert [c["file"] for c in turn["citations"]] == ["bread.txt"]
    data = run_json(capsys, ["ask", str(docs), "tea?", "--filter", "file_name!=tea.txt", "--filter", "chunk=0",
                             "--top-k", "5", *where])
    assert sorted(c["file"] for c in data["turns"][0]["citations"]) == ["bread.txt", "milvus.md"]


# --- response mode, rewrite strategy, chat mode, system prompt --------------------------------------------
def test_no_llm_response_mode_and_rewrite_strategy_reach_the_engine(capsys, docs, where, tmp_path):
    data = run_json(capsys, ["ask", str(docs), "How long should green tea steep?", "--follow-up", "And black?",
                             "--response-mode", "context_only", "--rewrite-strategy", "none", *where])
    first, second = data["turns"]
    # context_only: the numbered passages with their metadata, not the default extractive sentences
    assert first["answer"].startswith("[1] title: ") and "file_name: tea.txt" in first["answer"]
    assert second["retrieval_query"] == "And black?"  # strategy none: the follow-up as typed
    store = SQLiteConversationStore(tmp_path / "chats.db")
    record = TurnRecord.from_dict(store.get_turn_record(second["message_id"]))
    store.close()
    assert record.rewrite_strategy == "none"


@pytest.mark.parametrize("argv, message", [
    (["--response-mode", "compact"], "--response-mode compact need(s) an LLM"),
    (["--rewrite-strategy", "llm"], "--rewrite-strategy llm need(s) an LLM"),
    (["--rerank", "llm"], "--rerank llm need(s) an LLM"),
    (["--chat-mode", "context", "--system-prompt", "Be brief."], "--system-prompt need(s) an LLM"),
])
def test_llm_options_without_an_llm_exit_2_before_any_io(capsys, docs, tmp_path, argv, message):
    db = tmp_path / "m.db"
    code, out, err = run(capsys, ["ask", str(docs), "tea?", *argv, "--uri", str(db)])
    assert code == 2 and out == "" and message in err and "--response-mode context_only/extractive/no_text" in err
    assert not db.exists()


@pytest.mark.parametrize("argv, message", [
    (["--system-prompt", "Be brief."], "--system-prompt shapes the answers of --chat-mode condense_plus_context"),
    (["--chat-mode", "context", "--rewrite-strategy", "concat"], "drop --rewrite-strategy concat"),
])
def test_combinations_no_chat_mode_accepts_exit_2(capsys, docs, tmp_path, argv, message):
    db = tmp_path / "m.db"
    code, _, err = run(capsys, ["ask", str(docs), "tea?", *argv, "--uri", str(db)])
    assert code == 2 and message in err and not db.exists()


def test_system_prompt_and_chat_mode_reach_the_llm(capsys, docs, where, openai_server):
    data = run_json(capsys, ["ask", str(docs), "How long should green tea steep?", "--base-url",
                             openai_server.base_url, "--model", "local", "--chat-mode", "condense_plus_context",
                             "--system-prompt", "Answer like a pirate.", *where])
    assert data["mode"] == "llm" and data["turns"][0]["answer"].startswith("echo: ")
    chats = [r.body for r in openai_server.requests if r.path.endswith("/chat/completions")]
    assert chats and chats[-1]["messages"][0]["role"] == "system"
    assert "Answer like a pirate." in chats[-1]["messages"][0]["content"]


def test_llm_response_mode_reaches_the_synthesizer(capsys, docs, where, openai_server):
    data = run_json(capsys, ["ask", str(docs), "How long should green tea steep?", "--base-url",
                             openai_server.base_url, "--model", "local", "--response-mode", "refine",
                             "--top-k", "3", "--context-window", "32768", "--max-tokens", "8000", *where])
    # the echo server answers with the whole prompt: room for it, so the answer is not cut at its output limit
    assert data["turns"][0]["answer"].startswith("echo: ")
    chats = [r for r in openai_server.requests if r.path.endswith("/chat/completions")]
    # refine: one call per passage that does not fit with the others... at least one call, through the LLM
    assert chats


# --- reranker ----------------------------------------------------------------------------------------------
def test_embedding_rerank_reorders_and_explains_the_score(capsys, docs, where):
    code, out, err = run(capsys, ["ask", str(docs), "How long should green tea steep?", "--rerank", "embedding",
                                  "--top-k", "2", *where])
    assert code == 0, err
    assert "scores: [n] is the rank; score = reranker: best cosine similarity of the question and a window of " \
           "the passage (-1 to 1)" in out.splitlines()
    data = run_json(capsys, ["ask", str(docs), "How long should green tea steep?", "--rerank", "embedding",
                             "--top-k", "2", *where])
    citations = data["turns"][0]["citations"]
    assert citations[0]["file"] == "tea.txt" and len(citations) == 2
    assert -1.0 <= citations[1]["score"] <= citations[0]["score"] <= 1.0  # cosines, not min-max fused scores


def test_llm_rerank_puts_the_llms_pick_first(capsys, docs, where, openai_server):
    """``--rerank llm``: the LLM ranks the fused candidates (listwise prompt); its pick comes first even when
    retrieval ranked it last."""
    from llama_index_convrag.testing import echo_chat

    def responder(body):
        text = body["messages"][-1]["content"]
        if "numbered documents" not in text:
            return echo_chat(body)
        numbers = [n for n, doc in re.findall(r"Document (\d+):\n([^\n]*)", text) if "Sourdough" in doc]
        return {"content": f"Doc: {numbers[0]}, Relevance: 10"}

    openai_server.chat_responder = responder
    data = run_json(capsys, ["ask", str(docs), "How long should green tea steep?", "--base-url",
                             openai_server.base_url, "--model", "local", "--rerank", "llm", "--top-k", "2", *where])
    citations = data["turns"][0]["citations"]
    assert [c["file"] for c in citations][0] == "bread.txt" and len(citations) == 2
    assert data["turns"][0]["scores"].startswith("[n] is the rank; score = reranker: the LLM's relevance grade")
    assert any("numbered documents" in r.body["messages"][-1]["content"] for r in openai_server.requests
               if r.path.endswith("/chat/completions"))


# --- conversations: resume, list, export -------------------------------------------------------------------
def test_resume_list_and_export_a_conversation(capsys, docs, where, tmp_path, monkeypatch):
    first = run_json(capsys, ["ask", str(docs), "How long should green tea steep?", *where])["turns"][0]
    cid = first["conversation_id"]
    resumed = run_json(capsys, ["ask", str(docs), "And black?", "--conversation", cid, *where])["turns"][0]
    assert resumed["conversation_id"] == cid
    assert resumed["retrieval_query"] == "And black? green tea steep"  # terms of the first run's question
    code, _, err = run(capsys, ["ask", str(docs), "And black?", "--conversation", cid, *where])
    assert code == 0 and "(resumed, 4 earlier messages)" in err

    monkeypatch.setattr(sys, "stdin", io.StringIO("And oolong?\n"))  # chat resumes the same way
    chatted = run_json(capsys, ["chat", "--conversation", cid, *where])["turns"][0]
    assert chatted["conversation_id"] == cid and chatted["retrieval_query"].startswith("And oolong? ")
    assert {"tea", "black"} <= set(chatted["retrieval_query"].split())  # the resumed history's terms

    other = run_json(capsys, ["ask", str(docs), "How do I bake sourdough?", *where])["turns"][0]["conversation_id"]
    store = ["--store", str(tmp_path / "chats.db")]
    listed = run_json(capsys, ["conversations", "list", *store])["conversations"]
    assert [(c["conversation_id"], c["questions"]) for c in listed] == [(cid, 4), (other, 1)]
    assert listed[0]["first_question"] == "How long should green tea steep?"
    code, out, _ = run(capsys, ["conversations", "list", *store])
    assert code == 0 and out.splitlines()[0].startswith(f"{cid}\t4 question(s)\t")

    exported = run_json(capsys, ["conversations", "export", cid, *store])
    roles = [(m["role"], m["status"]) for m in exported["messages"]]
    assert roles == [("user", "complete"), ("assistant", "complete")] * 4
    assert exported["messages"][2]["content"] == "And black?"
    assert exported["messages"][1]["citations"][0]["ref_doc_id"].endswith("tea.txt")
    assert [t["retrieval_query"] for t in exported["turns"]][:2] == [first["retrieval_query"],
                                                                    resumed["retrieval_query"]]
    code, out, _ = run(capsys, ["conversations", "export", cid, "--format", "markdown", *store])
    assert code == 0 and out.startswith(f"# Conversation {cid}\n\n## user\n\nHow long should green tea steep?\n")
    assert "- [1] " in out and out.count("## assistant") == 4


def test_unknown_conversation_or_store_exit_3_and_creates_nothing(capsys, docs, tmp_path, where):
    db = tmp_path / "m.db"
    missing_store = tmp_path / "none.db"
    code, _, err = run(capsys, ["ask", str(docs), "tea?", "--conversation", "abc", "--uri", str(db),
                                "--store", str(missing_store)])
    assert code == 3 and "no conversation store at" in err and not db.exists() and not missing_store.exists()
    assert run(capsys, ["conversations", "list", "--store", str(missing_store)])[0] == 3
    assert not missing_store.exists()
    run_json(capsys, ["ask", str(docs), "tea?", *where])  # creates the store
    code, _, err = run(capsys, ["ask", str(docs), "tea?", "--conversation", "abc", *where])
    assert code == 3 and "no conversation 'abc'" in err and "convrag conversations list" in err
    code, out, err = run(capsys, ["conversations", "export", "abc", "--store", str(tmp_path / "chats.db"), "--json"])
    assert code == 3 and json.loads(out)["error"]["exit_code"] == 3


def test_default_store_of_conversations_list_is_beside_the_milvus_file(capsys, docs, tmp_path):
    uri = tmp_path / "own" / "m.db"
    uri.parent.mkdir()
    cid = run_json(capsys, ["ask", str(docs), "tea?", "--uri", str(uri)])["turns"][0]["conversation_id"]
    listed = run_json(capsys, ["conversations", "list", "--uri", str(uri)])
    assert Path(listed["store"]) == uri.parent / "convrag_chats.db"
    assert [c["conversation_id"] for c in listed["conversations"]] == [cid]


# --- Milvus token ------------------------------------------------------------------------------------------
def test_milvus_token_is_documented_and_reaches_the_client(capsys, monkeypatch):
    from llama_index_convrag.milvus.client import client_kwargs, resolve_milvus

    assert main(["--help"]) == 0
    assert "CONVRAG_MILVUS_TOKEN" in capsys.readouterr().out
    assert main(["ingest", "--help"]) == 0
    assert "CONVRAG_MILVUS_TOKEN" in capsys.readouterr().out
    assert "CONVRAG_MILVUS_TOKEN" in (Path(__file__).resolve().parents[2] / "README.md").read_text()
    monkeypatch.setenv("CONVRAG_MILVUS_TOKEN", "user:secret")
    target = resolve_milvus("http://milvus.example:19530")  # what the CLI's connect() resolves --uri with
    assert target.token == "user:secret" and client_kwargs(target, 1.0)["token"] == "user:secret"


# --- --no-feedback ---------------------------------------------------------------------------------------------
def test_no_feedback_turns_the_feedback_search_off_and_says_what_the_score_is(capsys, docs, where):
    from llama_index_convrag.cli import build_parser
    from llama_index_convrag.cli_commands.engine_options import retriever_kwargs

    on = build_parser().parse_args(["ask", str(docs), "tea?"])
    off = build_parser().parse_args(["ask", str(docs), "tea?", "--no-feedback"])
    assert "feedback" not in retriever_kwargs(on, None, None)  # the library default (on where it can run)
    assert retriever_kwargs(off, None, None) == {"similarity_top_k": 10, "search_type": "hybrid",  # 2 hits a passage
                                                 "ranker_type": "weighted", "feedback": False}
    data = run_json(capsys, ["ask", str(docs), "How do I bake sourdough?", "--no-feedback", *where])
    assert data["turns"][0]["scores"] == (
        "[n] is the rank; score = weighted mean of the dense and BM25 scores (0.5/0.5), each min-max normalised "
        "per query: 1.0 is the best passage of this query, not a perfect match")


# --- what each hit is read with: --top-k, --widen, --no-widen -----------------------------------------------------
@pytest.mark.parametrize("command", ["ask", "chat", "serve"])
@pytest.mark.parametrize("argv, widen", [
    ([], "default"),
    (["--top-k", "8"], WidenRules(before=1, after=1, passages=8)),
    (["--top-k", "3", "--widen", "2"], WidenRules(before=2, after=2, passages=3)),
    (["--widen", "0"], None),
    (["--top-k", "20", "--no-widen"], None),
])
def test_top_k_and_widen_become_the_answer_options_widen(command, argv, widen):
    from llama_index_convrag.cli import build_parser
    from llama_index_convrag.cli_commands.engine_options import engine_kwargs, retriever_kwargs

    positional = {"ask": ["docs", "tea?"], "chat": [], "serve": []}[command]
    args = build_parser().parse_args([command, *positional, *argv])
    if command == "serve":  # each worker rebuilds them from JSON (CONVRAG_SERVE_OPTIONS)
        args = argparse.Namespace(**json.loads(json.dumps({k: v for k, v in vars(args).items() if k != "func"})))
    kw = engine_kwargs(args, None)
    if widen == "default":  # --top-k 5 and one chunk each side: the engine's own default, not restated
        assert kw["answer"].widen == DEFAULT_WIDEN and kw["answer"] == AnswerOptions(response_mode="extractive")
    else:
        assert kw["answer"].widen == widen
    # widened: twice as many hits as passages (merged hits leave their places); else the top-k hits as they are
    assert retriever_kwargs(args, None, None)["similarity_top_k"] == args.top_k * (1 if widen is None else 2)


def test_a_negative_widen_exits_2_naming_the_value(capsys, docs, tmp_path):
    code, out, err = run(capsys, ["ask", str(docs), "tea?", "--widen", "-1", "--uri", str(tmp_path / "m.db")])
    assert code == 2 and out == "" and "argument --widen: expected an integer >= 0, got '-1'" in err
