import json

import numpy as np
import pytest

from llama_index_convrag.evaluation.report import (REPORT_SCHEMA, build_report, latency_summary, load_report,
                                                   metric_table, write_report)


def test_latency_summary_percentiles():
    summary = latency_summary([0.001 * i for i in range(1, 21)])  # 1..20 ms
    assert summary == {"count": 20, "mean_ms": 10.5, "p50_ms": 10.5, "p95_ms": 19.05, "max_ms": 20.0}
    assert latency_summary([]) == {"count": 0, "mean_ms": 0.0, "p50_ms": 0.0, "p95_ms": 0.0, "max_ms": 0.0}


def test_report_round_trip(tmp_path):
    results = {"dense": {"metrics": {"ndcg@10": np.float64(0.5), "recall@10": float("nan")},
                         "latency": {"p50_ms": 3.0, "p95_ms": 7.25}, "per_query": {"q1": {"n": np.int64(2)}}}}
    report = build_report("retrieval", config={"dataset": tmp_path / "scifact", "top_k": 10}, results=results)
    path = write_report(tmp_path / "out" / "report.json", report)
    loaded = load_report(path)
    assert loaded == json.loads(path.read_text(encoding="utf-8"))
    assert loaded["schema"] == REPORT_SCHEMA and loaded["kind"] == "retrieval"
    assert loaded["config"] == {"dataset": str(tmp_path / "scifact"), "top_k": 10}
    assert loaded["results"]["dense"]["metrics"] == {"ndcg@10": 0.5, "recall@10": None}
    assert loaded["results"]["dense"]["per_query"] == {"q1": {"n": 2}}
    assert set(loaded["environment"]["packages"]) >= {"llama-index-core", "ranx"}


def test_report_errors(tmp_path):
    with pytest.raises(ValueError, match=r"kind must be one of \['retrieval', 'conversation', 'answers'\], got 'x'"):
        build_report("x", config={}, results={"a": {}})
    with pytest.raises(ValueError, match="at least one configuration"):
        build_report("retrieval", config={}, results={})
    with pytest.raises(TypeError, match="JSON-serialisable, got object"):
        build_report("retrieval", config={"bad": object()}, results={"a": {}})
    with pytest.raises(ValueError, match="not a report built by build_report"):
        write_report(tmp_path / "r.json", {"results": {}})
    (tmp_path / "other.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="not an evaluation report"):
        load_report(tmp_path / "other.json")


def test_metric_table():
    report = build_report("retrieval", config={}, results={
        "dense": {"metrics": {"ndcg@10": 0.66, "recall@100": 0.932}, "latency": {"p50_ms": 3.04, "p95_ms": 7.0}},
        "hybrid rrf": {"metrics": {"ndcg@10": 0.7095, "recall@100": None}, "latency": {"p50_ms": 11.6, "p95_ms": 20.0}},
        "engine records": {"metrics": {"ndcg@10": 0.5, "recall@100": 0.75},
                           "latency": {"count": 0, "p50_ms": 0.0, "p95_ms": 0.0}},
    })
    assert metric_table(report).splitlines() == [
        "configuration  | ndcg@10 | recall@100 | p50 ms | p95 ms",
        "---------------+---------+------------+--------+-------",
        "dense          |  0.6600 |     0.9320 |    3.0 |    7.0",
        "hybrid rrf     |  0.7095 |          - |   11.6 |   20.0",
        "engine records |  0.5000 |     0.7500 |      - |      -",
    ]
