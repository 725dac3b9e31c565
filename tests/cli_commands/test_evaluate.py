"""``convrag eval retrieval`` and ``convrag eval conversation`` in-process (``main(argv)``) on tiny data sets: real
Milvus Lite, the real local model, ranx (its kernels compiled once per test run: ``ranx_compiled``), the local
OpenAI-compatible server for the LLM rewrite strategy. Apart from ``tests/test_cli.py`` so that the scoring tests start
after the run's ranx warm-up, and the longest test file is shorter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from PIL import Image

from tests.test_cli import DOCS, _chat_bodies, run, run_json


def _tiny_beir(tmp_path: Path) -> Path:
    root = tmp_path / "tinybeir"
    (root / "qrels").mkdir(parents=True)
    docs = {"d1": ("Tea", "Green tea steeps for two minutes."), "d2": ("Bread", "Sourdough needs a starter."),
            "d3": ("Milvus", "Milvus stores vectors for search."), "d4": ("Coffee", "Espresso uses fine grounds."),
            "d5": ("Bikes", "Chains need oil every month.")}
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n"
                                               for k, (t, x) in docs.items()), encoding="utf-8")
    queries = {"q1": "how long to steep green tea", "q2": "what does sourdough need", "q3": "vector database"}
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n"
                                                for k, v in queries.items()), encoding="utf-8")
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td3\t1\n",
                                              encoding="utf-8")
    return root


def test_bad_eval_configs_is_usage_error(capsys, tmp_path):
    beir = _tiny_beir(tmp_path)
    code, _, err = run(capsys, ["eval", "retrieval", str(beir), "--configs", "dense,magic"])
    assert code == 2
    assert "got 'dense,magic'" in err
    assert "['dense', 'sparse', 'hybrid-rrf', 'hybrid-weighted']" in err


def test_eval_refuses_a_foreign_collection_without_rebuild(capsys, tmp_path, milvus_target, collection_name):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    where = ["--uri", milvus_target.uri, "--collection", collection_name]
    assert run(capsys, ["ingest", str(docs), "-q", *where])[0] == 0
    code, _, err = run(capsys, ["eval", "retrieval", str(_tiny_beir(tmp_path)), "--out", str(tmp_path / "o"),
                                *where])
    assert code == 3
    assert f"collection {collection_name!r} exists with 3 rows" in err and "--rebuild" in err


def test_eval_retrieval_tiny_beir(capsys, tmp_path, milvus_target, milvus_client, ranx_compiled):
    beir = _tiny_beir(tmp_path)
    out_dir = tmp_path / "out"
    argv = ["eval", "retrieval", str(beir), "--out", str(out_dir), "--uri", milvus_target.uri,
            "--collection", "cli_tinybeir"]
    try:
        data = run_json(capsys, [*argv, "--configs", "dense,sparse,hybrid-rrf"])
        assert set(data["table"]) == {"dense", "sparse", "hybrid-rrf"}
        assert data["table"]["dense"]["ndcg@10"] == pytest.approx(1.0)  # each query names its one document
        assert data["config"]["indexed_now"] is True and data["config"]["corpus"] == 5
        report = json.loads(Path(data["files"]["report"]).read_text(encoding="utf-8"))
        assert report["kind"] == "retrieval" and set(report["results"]["sparse"]["per_query"]) == {"q1", "q2", "q3"}
        for key in ("plot", "latency_plot"):
            with Image.open(data["files"][key]) as image:
                assert image.format == "PNG" and image.size[0] >= 600
        code, out, err = run(capsys, [*argv, "--configs", "hybrid-weighted", "--max-queries", "2"])
        assert code == 0, err
        lines = out.splitlines()
        assert "2 queries, 5 documents, collection 'cli_tinybeir' (reused" in lines[0]
        assert lines[1].split() == ["configuration", "|", "ndcg@10", "|", "recall@100", "|", "mrr@10", "|", "p50",
                                    "ms"]
        assert lines[3].split()[:6] == ["hybrid-weighted", "|", "1.0000", "|", "1.0000", "|"]
    finally:
        milvus_client.drop_collection("cli_tinybeir")


def test_eval_retrieval_missing_dataset_exit_3(capsys, tmp_path):
    code, _, err = run(capsys, ["eval", "retrieval", str(tmp_path / "nope")])
    assert code == 3 and "BEIR data set folder not found" in err


def _tiny_cast(tmp_path: Path) -> Path:
    rows = []
    passages = {"p_tea": "Green tea steeps for two minutes in water at eighty degrees.",
                "p_black": "Black tea steeps for four minutes in boiling water.",
                "p_bread": "Sourdough bread rises overnight with a starter.",
                "p_crust": "Bake sourdough at 230 degrees until the crust is dark."}
    dialogues = [("1", [("How long does green tea steep?", "How long does green tea steep?", "p_tea"),
                        ("And black?", "How long does black tea steep?", "p_black")]),
                 ("2", [("How does sourdough rise?", "How does sourdough bread rise?", "p_bread"),
                        ("How hot should I bake it?", "How hot should I bake sourdough bread?", "p_crust")])]
    for topic, turns in dialogues:
        for i, (raw, manual, pid) in enumerate(turns, start=1):
            rows.append({"year": 2021, "topic_id": topic, "turn_id": f"{topic}_{i}", "raw_utterance": raw,
                         "manual_rewrite": manual, "canonical_result_id": pid, "gold_passage": passages[pid]})
    path = tmp_path / "cast" / "turns.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_eval_conversation_tiny_cast(capsys, tmp_path, milvus_target, milvus_client, ranx_compiled):
    turns = _tiny_cast(tmp_path)
    try:
        data = run_json(capsys, ["eval", "conversation", str(turns.parent), "--top-k", "2", "--search-type", "dense",
                                 "--out", str(tmp_path / "out"), "--uri", milvus_target.uri,
                                 "--collection", "cli_tinycast"])
    finally:
        milvus_client.drop_collection("cli_tinycast")
    assert list(data["table"]) == ["raw", "manual", "concat", "contextual"]
    assert data["table"]["manual"]["ndcg@2"] == pytest.approx(1.0)
    assert data["config"]["dialogues"] == 2 and data["config"]["passages"] == 4
    assert set(data["rewrite_effect"]) == {"manual", "concat", "contextual"}
    assert data["summary"]["contextual"]["followups"] == data["summary"]["raw"]["followups"] > 0
    report = json.loads(Path(data["files"]["report"]).read_text(encoding="utf-8"))
    assert report["results"]["concat"]["per_query"]["1_2"]["query"] == "How long does green tea steep? And black?"
    for key in ("plot", "turn_plot"):
        with Image.open(data["files"][key]) as image:
            assert image.format == "PNG"


def test_eval_conversation_llm_strategy_through_openai_server(capsys, tmp_path, milvus_target, milvus_client,
                                                              openai_server, ranx_compiled):
    turns = _tiny_cast(tmp_path)
    manual = {"And black?": "How long does black tea steep?",
              "How hot should I bake it?": "How hot should I bake sourdough bread?"}

    def rewrite(body: Dict[str, Any]) -> Dict[str, Any]:
        prompt = body["messages"][-1]["content"]
        follow_up = prompt.split("<Follow Up Message>")[1].split("<Standalone question>")[0].strip()
        return {"content": manual[follow_up]}

    openai_server.chat_responder = rewrite
    try:
        data = run_json(capsys, ["eval", "conversation", str(turns), "--top-k", "2", "--search-type", "dense",
                                 "--out", str(tmp_path / "out"), "--uri", milvus_target.uri,
                                 "--collection", "cli_tinycast_llm", "--base-url", openai_server.base_url,
                                 "--model", "x"])
    finally:
        milvus_client.drop_collection("cli_tinycast_llm")
    assert list(data["table"]) == ["raw", "manual", "concat", "contextual", "llm"]
    llm, human = data["table"]["llm"], data["table"]["manual"]
    assert {k: v for k, v in llm.items() if "@" in k} == {k: v for k, v in human.items() if "@" in k}
    assert llm["rewrite_em"] == 0.75  # first turns are sent as typed; 'How does sourdough rise?' differs
    assert len(_chat_bodies(openai_server)) == 2  # one condense call per turn with history
    assert data["config"]["llm"] == "x"
