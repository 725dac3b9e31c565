from __future__ import annotations

import pytest

from llama_index_convrag.postprocessors import FALLBACK_KEY, ModelRerank
from llama_index_convrag.postprocessors.scorers.http import HTTPRerankScorer, RerankHTTPError, build_payload, parse_scores
from tests.postprocessors.conftest import ids, make_nodes

DOCS = ["The Eiffel Tower is in Paris.", "Mitochondria make ATP.", "Paris is the capital of France."]
QUERY = "What is the capital of France?"


def expected_scores(embed_model):
    vectors = embed_model.embed([QUERY, *DOCS])
    return (vectors[1:] @ vectors[0]).tolist()


def scorer_for(server, **kw):
    kw.setdefault("backoff_s", 0.0)
    return HTTPRerankScorer(server.base_url, model="local-rerank", **kw)


def test_scores_come_back_in_input_order_from_the_real_server(openai_server, embed_model):
    scores = scorer_for(openai_server).score(QUERY, DOCS)
    assert scores == pytest.approx(expected_scores(embed_model), abs=1e-6)
    assert openai_server.paths() == ["/v1/rerank"]
    assert openai_server.requests[0].body == {"model": "local-rerank", "query": QUERY, "documents": DOCS, "top_n": 3}


async def test_async_scores_match(openai_server, embed_model):
    scores = await scorer_for(openai_server).ascore(QUERY, DOCS)
    assert scores == pytest.approx(expected_scores(embed_model), abs=1e-6)


@pytest.mark.parametrize("status", [503, 429])
def test_retries_on_retryable_status(openai_server, embed_model, status):
    openai_server.fail_next(status, times=2)
    scores = scorer_for(openai_server, max_retries=2).score(QUERY, DOCS)
    assert scores == pytest.approx(expected_scores(embed_model), abs=1e-6)
    assert openai_server.paths() == ["/v1/rerank"] * 3


async def test_async_retries_then_gives_up_with_a_clear_error(openai_server):
    openai_server.fail_next(503, times=3)
    with pytest.raises(RerankHTTPError, match=r"answered HTTP 503 after 2 tries"):
        await scorer_for(openai_server, max_retries=1).ascore(QUERY, DOCS)
    assert len(openai_server.requests) == 2


def test_client_error_is_not_retried(openai_server):
    openai_server.fail_next(400)
    with pytest.raises(RerankHTTPError, match=r"answered HTTP 400: .*injected failure 400"):
        scorer_for(openai_server, max_retries=3).score(QUERY, DOCS)
    assert len(openai_server.requests) == 1


def test_timeout_is_retried_then_reported(openai_server):
    openai_server.delay_s = 0.5
    with pytest.raises(RerankHTTPError, match=r"timed out after 0.1s \(2 tries\)"):
        scorer_for(openai_server, timeout_s=0.1, max_retries=1).score(QUERY, DOCS)
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize("use_async", [False, True])
async def test_timeout_falls_back_to_incoming_order(openai_server, use_async):
    openai_server.delay_s = 0.5
    reranker = ModelRerank(scorer_for(openai_server, timeout_s=0.1, max_retries=0), top_n=2)
    nodes = make_nodes(DOCS, [0.3, 0.2, 0.1])
    if use_async:
        out = await reranker.apostprocess_nodes(nodes, query_str=QUERY)
    else:
        out = reranker.postprocess_nodes(nodes, query_str=QUERY)
    assert ids(out) == ["n0", "n1"]
    assert "timed out after 0.1s" in out[0].node.metadata[FALLBACK_KEY]


def test_model_rerank_over_http_picks_the_answer(openai_server):
    reranker = ModelRerank(scorer_for(openai_server), top_n=1)
    out = reranker.postprocess_nodes(make_nodes(DOCS, [0.3, 0.2, 0.1]), query_str=QUERY)
    assert ids(out) == ["n2"]
    assert out[0].node.metadata["convrag_rank_trail"][-1]["scorer"] == "http:local-rerank"


def test_payload_and_auth_header(openai_server):
    assert build_payload("m", "q", ["x", "y"]) == {"model": "m", "query": "q", "documents": ["x", "y"], "top_n": 2}
    scorer = scorer_for(openai_server, api_key="sk-test")
    assert scorer._headers["Authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    "payload",
    [
        {"results": [{"index": 1, "relevance_score": 0.2}, {"index": 0, "relevance_score": 0.8}]},
        {"output": {"results": [{"index": 0, "relevance_score": 0.8}, {"index": 1, "relevance_score": 0.2}]}},
        [{"index": 1, "score": 0.2}, {"index": 0, "score": 0.8}],
    ],
    ids=["cohere-jina-vllm", "dashscope-native", "tei"],
)
def test_parse_accepts_the_common_shapes(payload):
    assert parse_scores(payload, 2, "u") == [0.8, 0.2]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"results": [{"index": 2, "relevance_score": 0.1}, {"index": 0, "relevance_score": 0.1}]},
         "index 2 out of range [0, 1]"),
        ({"results": [{"index": 0, "relevance_score": 0.1}, {"index": 0, "relevance_score": 0.2}]},
         "index 0 appears twice"),
        ({"results": [{"index": 0, "relevance_score": 0.1}]}, "no score for documents [1] of 2"),
        ({"results": [{"index": 0, "relevance_score": "high"}, {"index": 1, "relevance_score": 1}]},
         "no numeric relevance_score"),
        ({"error": "busy"}, "has no 'results' list"),
    ],
)
def test_parse_rejects_bad_replies(payload, message):
    with pytest.raises(RerankHTTPError) as info:
        parse_scores(payload, 2, "u")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "localhost:8000"}, "base_url must start with http:// or https://, got 'localhost:8000'"),
        ({"model": ""}, "model must be a non-empty model name, got ''"),
        ({"timeout_s": 0}, "timeout_s must be > 0, got 0"),
        ({"max_retries": -1}, "max_retries must be >= 0, got -1"),
        ({"backoff_s": -0.5}, "backoff_s must be >= 0, got -0.5"),
    ],
)
def test_validation(kwargs, message):
    args = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs}
    base_url = args.pop("base_url")
    with pytest.raises(ValueError) as info:
        HTTPRerankScorer(base_url, **args)
    assert str(info.value) == message


def test_empty_input_makes_no_request(openai_server):
    assert scorer_for(openai_server).score(QUERY, []) == []
    assert openai_server.requests == []
