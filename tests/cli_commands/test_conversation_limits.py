"""``ask`` / ``chat`` against a model's limits, through the real local OpenAI-compatible server: the window read from
the server (or set), ``max_tokens`` always sent, the budget fitting ``--top-k 8`` into a small window on every
route, answers cut at the output limit or empty stored as ``error``, an LLM reranker that fails or must fit, a
server that dies mid-stream or is too slow (exit 5, the next question still runs), ``--no-citations``."""

import io
import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

from llama_index_convrag.cli import main
from llama_index_convrag.cli_commands.conversation import RERANK_FAILED
from llama_index_convrag.storage.conversation import SQLiteConversationStore

TOPICS = ["green tea", "black tea", "oolong", "white tea", "matcha", "rooibos", "chamomile", "earl grey"]
WINDOW = 1024  # llama.cpp's /props says so; 8 passages of ~250 tokens cannot all fit
LONG_ANSWER = " ".join(f"step{i}" for i in range(400))


def write_docs(folder: Path, sentence: Callable[[str, int, int], str], sentences: int) -> Path:
    """One file per topic of :data:`TOPICS`: a title, then ``sentences`` sentences ``sentence(topic, i, j)``."""
    folder.mkdir()
    for i, topic in enumerate(TOPICS):
        words = " ".join(sentence(topic, i, j) for j in range(sentences))
        (folder / f"tea{i}.md").write_text(f"# {topic}\n{words}\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The eight tea files, written once for the module (no test changes them)."""
    return write_docs(tmp_path_factory.mktemp("tea") / "docs", lambda t, i, j: f"{t} note {i}-{j} about steeping "
                                                                               f"water temperature and leaves.", 25)


@pytest.fixture(scope="module")
def docs_collection(milvus_client: Any) -> Iterator[str]:
    """One collection for the tests that ask :func:`docs`: the first ``ask`` embeds the files, the later ones find
    every file unchanged (what they check is the turn, not the ingest)."""
    name = "limits_tea_docs"
    yield name
    if milvus_client.has_collection(name):
        milvus_client.drop_collection(name)


@pytest.fixture
def where(milvus_target: Any, docs_collection: str, tmp_path: Path) -> List[str]:
    """The shared collection of :func:`docs`; a conversation store of the test's own."""
    return ["--uri", milvus_target.uri, "--collection", docs_collection, "--store", str(tmp_path / "c.db")]


@pytest.fixture
def own_where(milvus_target: Any, collection_name: str, tmp_path: Path) -> List[str]:
    """A collection and a conversation store of the test's own: for the tests that write files of their own."""
    return ["--uri", milvus_target.uri, "--collection", collection_name, "--store", str(tmp_path / "c.db")]


@pytest.fixture
def server(openai_server: Any) -> Any:
    openai_server.props = {"default_generation_settings": {"n_ctx": WINDOW}}
    openai_server.context_window = WINDOW  # past it: HTTP 400, as llama-cpp-python answers
    openai_server.chat_responder = answer_or_rank
    return openai_server


def answer_or_rank(body: Dict[str, Any]) -> Dict[str, Any]:
    text = body["messages"][-1]["content"]
    if "numbered documents" in text:
        return {"content": "Doc: 2, Relevance: 9\nDoc: 1, Relevance: 5"}
    return {"content": "Steep it for two minutes [1]."}


def run(capsys: pytest.CaptureFixture, argv: List[str]) -> Any:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def llm_args(server: Any) -> List[str]:
    return ["--base-url", server.base_url, "--model", "local"]


def chat_bodies(server: Any) -> List[Dict[str, Any]]:
    return [r.body for r in server.requests if r.path.endswith("/chat/completions")]


def stored(tmp_path: Path, role: str) -> List[Any]:
    store = SQLiteConversationStore(tmp_path / "c.db")
    try:
        return [m for cid in store.list_conversations() for m in store.get_conversation(cid) if m.role == role]
    finally:
        store.close()


def stored_answers(tmp_path: Path) -> List[Any]:
    return stored(tmp_path, "assistant")


def turn_records(tmp_path: Path) -> List[Dict[str, Any]]:
    store = SQLiteConversationStore(tmp_path / "c.db")
    try:
        return [r for cid in store.list_conversations() for r in store.list_turn_records(cid)]
    finally:
        store.close()


# --- the window, max_tokens, the budget on every route -----------------------------------------------------------
@pytest.mark.parametrize("route", [["--response-mode", "compact"], ["--response-mode", "refine"],
                                   ["--response-mode", "tree_summarize"], ["--chat-mode", "condense_plus_context"]])
def test_top_k_8_fits_the_window_the_server_reports(capsys, docs, where, server, route):
    code, out, err = run(capsys, ["ask", str(docs), "How hot should the water be for green tea?", "--top-k", "8",
                                  "--citation-mode", "inline", *route, *llm_args(server), *where, "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["llm_limits"]["context_window"] == WINDOW
    assert data["llm_limits"]["sources"]["context_window"] == "server GET /props"
    assert data["llm_limits"]["max_tokens"] == WINDOW // 4  # no limit stated: 512 capped at a quarter
    turn = data["turns"][0]
    assert turn["status"] == "complete" and turn["answer"] == "Steep it for two minutes [1]."
    bodies = chat_bodies(server)
    assert bodies and all(b["max_tokens"] == WINDOW // 4 for b in bodies)  # always sent
    assert "/props" in server.probes


def test_the_budget_drops_passages_and_says_the_window_in_the_turn_record(capsys, docs, where, server, tmp_path):
    code, out, err = run(capsys, ["ask", str(docs), "How hot should the water be for green tea?", "--top-k", "8",
                                  *llm_args(server), *where])
    assert code == 0, err
    assert f"llm: context window {WINDOW} (server GET /props), max tokens {WINDOW // 4} (default), timeout 300 s " \
           f"(default)" in err
    (record,) = turn_records(tmp_path)
    assert record["status"] == "complete"
    trim = record["trim_report"]
    assert (trim["context_window"], trim["reserved_output"]) == (WINDOW, WINDOW // 4)
    assert trim["total"] <= trim["budget"] < WINDOW
    # each hit is read widened to its neighbours (AnswerOptions.widen, on by default): the budget cuts every
    # passage back to its matched chunk first, and only then drops the lowest-ranked chunks
    sections = [d["section"] for d in trim["dropped"]]
    assert set(sections) == {"widening", "context"} and len(trim["kept_chunks"]) < 8
    assert sections.index("context") > max(i for i, s in enumerate(sections) if s == "widening")
    assert trim["widened"] == []  # nothing is read widened once a chunk had to go


def test_without_the_window_the_server_refuses_the_same_turn(capsys, docs, where, server):
    """The check itself: the window left at the default 8192, the same turn is an HTTP 400 (exit 5)."""
    server.props = None
    code, _, err = run(capsys, ["ask", str(docs), "How hot should the water be for green tea?", "--top-k", "8",
                                "--context-window", "8192", *llm_args(server), *where])
    assert code == 5
    assert f"This model's maximum context length is {WINDOW} tokens" in err


def test_top_k_past_five_reads_that_many_passages_and_no_widen_reads_the_hits_alone(capsys, own_where, server,
                                                                                   tmp_path):
    """Eight one-chunk files in a window that holds them all: ``--top-k 8`` reads eight passages (the widening's cap
    follows it), each widened (read through the widener, alone in its file); ``--no-widen`` reads the same eight hits
    as they are."""
    docs = write_docs(tmp_path / "docs", lambda t, i, j: f"{t} note {i}-{j} about steeping water temperature.", 4)
    server.props = {"default_generation_settings": {"n_ctx": 32768}}
    server.context_window = None
    for extra in ([], ["--no-widen"]):
        code, _, err = run(capsys, ["ask", str(docs), "How hot should the water be for tea?", "--top-k", "8", *extra,
                                    *llm_args(server), *own_where])
        assert code == 0, err
    plain, narrow = (r["trim_report"] for r in turn_records(tmp_path))
    assert plain["kept_chunks"] == narrow["kept_chunks"] == list(range(8)) and not plain["dropped"]
    assert plain["widened"] == list(range(8)) and narrow["widened"] == []


@pytest.mark.parametrize("tokenize", [True, False])
def test_a_model_counting_more_tokens_than_tiktoken_is_budgeted_with_its_own_count(capsys, docs, where, server,
                                                                                   tokenize):
    """The served model needs twice the tokens tiktoken counts for the same text: with its ``/tokenize`` the budget
    counts as it does and the turn fits; without, tiktoken's count and 5% slack are not enough (HTTP 400)."""
    server.token_scale, server.tokenize = 2.0, tokenize
    code, _, err = run(capsys, ["ask", str(docs), "How hot should the water be for green tea?", "--top-k", "8",
                                *llm_args(server), *where])
    if tokenize:
        assert code == 0, err
        assert "/tokenize" in server.probes
    else:
        assert code == 5 and f"maximum context length is {WINDOW} tokens" in err


def test_option_beats_environment_beats_server(capsys, docs, where, server, monkeypatch):
    monkeypatch.setenv("CONVRAG_LLM_MAX_TOKENS", "100")
    monkeypatch.setenv("CONVRAG_LLM_CONTEXT_WINDOW", "900")
    code, out, err = run(capsys, ["ask", str(docs), "green tea?", "--max-tokens", "50", *llm_args(server), *where,
                                  "--json"])
    assert code == 0, err
    limits = json.loads(out)["llm_limits"]
    assert (limits["context_window"], limits["max_tokens"]) == (900, 50)
    assert limits["sources"] == {"context_window": "env CONVRAG_LLM_CONTEXT_WINDOW", "max_tokens": "option",
                                 "timeout": "default"}
    assert {b["max_tokens"] for b in chat_bodies(server)} == {50}


def test_a_bad_limit_in_the_environment_is_a_usage_error(capsys, docs, where, server, monkeypatch):
    monkeypatch.setenv("CONVRAG_LLM_TIMEOUT", "soon")
    code, out, err = run(capsys, ["ask", str(docs), "green tea?", *llm_args(server), *where])
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == ("convrag: error: the LLM timeout (env CONVRAG_LLM_TIMEOUT) must be a number of "
                                    "seconds > 0, got 'soon'")


# --- answers that are not complete ------------------------------------------------------------------------------
def test_an_answer_cut_at_max_tokens_is_stored_as_error_with_its_text(capsys, docs, where, server, tmp_path):
    server.chat_responder = lambda body: {"content": LONG_ANSWER}
    code, out, err = run(capsys, ["ask", str(docs), "green tea?", "--max-tokens", "12", *llm_args(server), *where,
                                  "--json"])
    assert code == 5
    turn = json.loads(out)["turns"][0]
    assert turn["status"] == "error"
    assert "the model stopped at its output limit (max_tokens=12)" in turn["error"]
    assert "the model stopped at its output limit (max_tokens=12)" in err
    (message,) = stored_answers(tmp_path)
    assert message.status == "error" and message.content == turn["answer"]
    assert message.content.startswith("step0 step1") and message.content != LONG_ANSWER


def test_a_streamed_answer_cut_at_max_tokens_is_error_and_the_chat_goes_on(capsys, docs, where, server, tmp_path,
                                                                          monkeypatch):
    # every call for the first question is cut (the prompt may take more than one call in this small window)
    server.chat_responder = lambda body: {"content": LONG_ANSWER if "green tea?" in str(body["messages"])
                                          else "Steep it for two minutes [1]."}
    monkeypatch.setattr(sys, "stdin", io.StringIO("green tea?\nblack tea?\n"))
    code, out, err = run(capsys, ["chat", str(docs), "--max-tokens", "12", "--rewrite-strategy", "none",
                                  "--citation-mode", "inline", *llm_args(server), *where])  # the model's marker
    assert code == 5
    assert out.count("answer> ") == 2 and "answer> Steep it for two minutes [1]." in out
    statuses = [m.status for m in stored_answers(tmp_path)]
    assert statuses == ["error", "complete"]


def test_an_empty_answer_is_never_shown_nor_stored_empty(capsys, docs, where, server, tmp_path):
    # the model answers nothing, also when asked again without citations: the extractive answer is shown, said so
    server.chat_responder = lambda body: {"content": ""}
    code, out, err = run(capsys, ["ask", str(docs), "green tea?", *llm_args(server), *where])
    assert code == 0
    assert "shown: the passages' sentences closest to the question" in out
    [answer] = stored_answers(tmp_path)
    assert answer.status == "complete" and answer.content.strip() and "[1]" in answer.content


# --- a server that dies or is slow --------------------------------------------------------------------------------
def test_a_server_dying_mid_stream_is_exit_5_and_the_next_question_runs(capsys, own_where, server, tmp_path,
                                                                        monkeypatch):
    # short files: the hit is read widened to its neighbours (AnswerOptions.widen, on by default), and a widened
    # 25-sentence file no longer fits one compact window here (each window must leave the refine prompt room for
    # the existing answer, max_tokens 256), so the answer would add a refine call; 8 sentences fit one call
    docs = write_docs(tmp_path / "docs", lambda t, i, j: f"{t} note {i}-{j} about steeping water temperature and "
                                                         f"leaves.", 8)
    streams = []

    def responder(body: Dict[str, Any]) -> Dict[str, Any]:
        if body.get("stream"):
            streams.append(1)
            server.reset_stream_after = 3 if len(streams) == 1 else None  # the first answer dies after 3 chunks
        return {"content": "Steep it for two minutes at eighty degrees [1]."}

    server.chat_responder = responder
    monkeypatch.setattr(sys, "stdin", io.StringIO("green tea?\nblack tea?\n"))
    # one passage: the answer is one streamed call in this small window (more would add a refine call first)
    code, out, err = run(capsys, ["chat", str(docs), "--rewrite-strategy", "none", "--top-k", "1", *llm_args(server),
                                  "--citation-mode", "inline", *own_where])  # the model's own marker is shown
    assert code == 5
    bodies = chat_bodies(server)
    assert len(bodies) == 2 and all(b.get("stream") and "Refined Answer" not in b["messages"][-1]["content"]
                                    for b in bodies)  # one streamed answer call per question, no retry
    assert "convrag: error: the LLM server closed the connection mid-answer" in err
    assert "unexpected error" not in err
    assert "answer> Steep it for two minutes at eighty degrees [1]." in out  # the second question's
    first, second = stored_answers(tmp_path)
    assert first.status == "error" and first.content == "Steep it "  # the partial text is kept
    assert second.status == "complete"
    assert [m.content for m in stored(tmp_path, "user")] == ["green tea?", "black tea?"]


def test_a_slow_server_times_out_with_the_limit_named(capsys, docs, where, server, tmp_path):
    server.delay_s = 3.0
    code, _, err = run(capsys, ["ask", str(docs), "green tea?", "--llm-timeout", "0.5", *llm_args(server), *where])
    assert code == 5
    assert ("the LLM server did not answer in time (timeout 0.5 s; raise it with --llm-timeout or "
            "CONVRAG_LLM_TIMEOUT)") in err
    assert [m.status for m in stored_answers(tmp_path)] == ["error"]


def test_a_stream_stalling_past_the_timeout_is_exit_5(capsys, docs, where, server, tmp_path, monkeypatch):
    server.slow_stream(3.0)
    monkeypatch.setattr(sys, "stdin", io.StringIO("green tea?\n"))
    code, _, err = run(capsys, ["chat", str(docs), "--llm-timeout", "0.5", "--rewrite-strategy", "none",
                                *llm_args(server), *where])
    assert code == 5
    assert "the LLM server did not answer in time (timeout 0.5 s" in err
    assert [m.status for m in stored_answers(tmp_path)] == ["error"]


# --- the LLM reranker ---------------------------------------------------------------------------------------------
def test_llm_rerank_fits_the_window_and_its_scores_are_said(capsys, docs, where, server):
    code, out, err = run(capsys, ["ask", str(docs), "green tea?", "--top-k", "8", "--rerank", "llm",
                                  *llm_args(server), *where, "--json"])
    assert code == 0, err
    turn = json.loads(out)["turns"][0]
    assert turn["warnings"] == []
    assert turn["scores"].endswith("the LLM's relevance grade, listed order breaking ties (only the order means "
                                   "something)")
    rank_prompts = [b for b in chat_bodies(server) if "numbered documents" in b["messages"][-1]["content"]]
    assert len(rank_prompts) == 1 and "Document 8:" in rank_prompts[0]["messages"][-1]["content"]


def test_llm_rerank_fits_the_window_counted_as_the_served_model_counts(capsys, docs, where, server):
    server.token_scale, server.tokenize = 2.0, True
    code, out, err = run(capsys, ["ask", str(docs), "green tea?", "--top-k", "8", "--rerank", "llm",
                                  *llm_args(server), *where, "--json"])
    assert code == 0, err
    assert json.loads(out)["turns"][0]["warnings"] == []  # the rerank prompt was not refused


def test_llm_rerank_that_fails_says_so_and_the_scores_line_tells_the_truth(capsys, docs, where, server, tmp_path):
    server.fail_next(400)  # the rerank call is the first LLM call of the turn
    code, out, err = run(capsys, ["ask", str(docs), "green tea?", "--rerank", "llm", *llm_args(server), *where,
                                  "--json"])
    assert code == 0, err
    turn = json.loads(out)["turns"][0]
    assert turn["status"] == "complete"
    assert len(turn["warnings"]) == 1 and turn["warnings"][0].startswith(
        "rerank failed, the retrieval order was kept: BadRequestError")
    assert turn["scores"].endswith(RERANK_FAILED) and "reranker:" not in turn["scores"]
    assert "convrag: warning: rerank failed" in err


# --- citations ----------------------------------------------------------------------------------------------------
def test_no_citations_sends_unnumbered_passages(capsys, docs, where, server):
    code, _, err = run(capsys, ["ask", str(docs), "green tea?", "--no-citations", *llm_args(server), *where])
    assert code == 0, err
    prompts = [body["messages"][-1]["content"] for body in chat_bodies(server)]  # refine steps in this window
    assert prompts and all("[1] " not in prompt for prompt in prompts) and "green tea note" in prompts[0]
    server.clear()
    server.chat_responder = answer_or_rank
    main(["ask", str(docs), "green tea?", "--citation-mode", "inline", *llm_args(server), *where])
    assert "[1] " in chat_bodies(server)[0]["messages"][-1]["content"]
    server.clear()
    main(["ask", str(docs), "green tea?", *llm_args(server), *where])  # the default: aligned after the answer
    assert "[1] " not in chat_bodies(server)[0]["messages"][-1]["content"]
