from __future__ import annotations

import logging

import pytest
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.schema import QueryBundle

from llama_index_convrag.postprocessors import FALLBACK_KEY, ModelRerank, RerankFallbackEvent
from llama_index_convrag.postprocessors.model_rerank import rank_by_score
from llama_index_convrag.postprocessors.scorers import EmbeddingScorer, LLMScorer
from llama_index_convrag.rank_trail import get_trail
from llama_index_convrag.testing import ScriptedLLM
from tests.postprocessors.conftest import TableScorer, ids, make_nodes

TABLE = {"a": 0.1, "b": 0.9, "c": 0.5, "d": 0.7}


def nodes4():
    return make_nodes(["a", "b", "c", "d"], [4.0, 3.0, 2.0, 1.0])


def test_rank_by_score_ties_keep_incoming_order_then_threshold_then_top_n():
    assert rank_by_score([0.5, 0.9, 0.5, 0.1], None, None) == [1, 0, 2, 3]
    assert rank_by_score([0.5, 0.9, 0.5, 0.1], None, 0.5) == [1, 0, 2]
    assert rank_by_score([0.5, 0.9, 0.5, 0.1], 2, 0.5) == [1, 0]


def test_reorders_keeps_top_n_and_records_trail():
    scorer = TableScorer(TABLE)
    out = ModelRerank(scorer, top_n=3).postprocess_nodes(nodes4(), query_str="q")
    assert ids(out) == ["n1", "n3", "n2"]
    assert [n.score for n in out] == [0.9, 0.7, 0.5]
    assert get_trail(out[1]) == [{"stage": "rerank", "rank": 2, "score": 0.7, "scorer": "table",
                                  "prev_rank": 4, "prev_score": 1.0}]
    assert scorer.calls == [("q", ["a", "b", "c", "d"])]


def test_does_not_change_incoming_scores():
    nodes = nodes4()
    ModelRerank(TableScorer(TABLE)).postprocess_nodes(nodes, query_str="q")
    assert [n.score for n in nodes] == [4.0, 3.0, 2.0, 1.0]


def test_threshold_batches_and_max_length():
    scorer = TableScorer({"a": 0.1, "b": 0.9, "c": 0.5, "d": 0.7})
    nodes = make_nodes(["a", "b", "c", "d"])
    out = ModelRerank(scorer, score_threshold=0.6, batch_size=3).postprocess_nodes(nodes, query_str="q")
    assert ids(out) == ["n1", "n3"]
    assert scorer.calls == [("q", ["a", "b", "c"]), ("q", ["d"])]
    long = TableScorer({"abc": 1.0})
    ModelRerank(long, max_length=3).postprocess_nodes(make_nodes(["abcdef"]), query_str="q")
    assert long.calls == [("q", ["abc"])]


async def test_async_twin_matches_sync():
    sync = ModelRerank(TableScorer(TABLE), top_n=2).postprocess_nodes(nodes4(), query_str="q")
    asyn = await ModelRerank(TableScorer(TABLE), top_n=2).apostprocess_nodes(nodes4(), query_str="q")
    assert [(n.node.node_id, n.score) for n in asyn] == [(n.node.node_id, n.score) for n in sync]


@pytest.mark.parametrize("use_async", [False, True])
async def test_scorer_failure_falls_back_to_incoming_order(use_async, caplog, events):
    reranker = ModelRerank(TableScorer(TABLE, fail=ConnectionError("down")), top_n=3, score_threshold=0.95)
    caplog.set_level(logging.WARNING)
    if use_async:
        out = await reranker.apostprocess_nodes(nodes4(), query_str="q")
    else:
        out = reranker.postprocess_nodes(nodes4(), query_str="q")
    assert ids(out) == ["n0", "n1", "n2"]  # threshold not applied to scores of another kind
    assert [n.score for n in out] == [4.0, 3.0, 2.0]
    assert all(n.node.metadata[FALLBACK_KEY] == "ConnectionError: down" for n in out)
    assert "convrag_rerank_fallback" not in out[0].node.get_content(metadata_mode="llm")
    assert get_trail(out[2])[-1] == {"stage": "rerank", "rank": 3, "score": 2.0, "scorer": "table",
                                     "prev_rank": 3, "prev_score": 2.0, "fallback": True}
    assert "rerank with table failed" in caplog.text
    kinds = [type(e) for e in events if isinstance(e, (ReRankStartEvent, ReRankEndEvent, RerankFallbackEvent))]
    assert kinds == [ReRankStartEvent, RerankFallbackEvent, ReRankEndEvent]


def test_wrong_number_of_scores_is_a_failure_and_success_clears_the_mark():
    class Short(TableScorer):
        def score(self, query, texts):
            return [1.0]

    nodes = nodes4()
    out = ModelRerank(Short(TABLE)).postprocess_nodes(nodes, query_str="q")
    assert "returned 1 scores for 4 texts" in out[0].node.metadata[FALLBACK_KEY]
    again = ModelRerank(TableScorer(TABLE)).postprocess_nodes(nodes, query_str="q")
    assert all(FALLBACK_KEY not in n.node.metadata for n in again)


def test_on_error_raise_reraises():
    with pytest.raises(ConnectionError, match="down"):
        ModelRerank(TableScorer(TABLE, fail=ConnectionError("down")), on_error="raise").postprocess_nodes(
            nodes4(), query_str="q")


def test_events_carry_query_top_n_and_scorer(events):
    out = ModelRerank(TableScorer(TABLE), top_n=2).postprocess_nodes(nodes4(), query_bundle=QueryBundle("q"))
    start = next(e for e in events if isinstance(e, ReRankStartEvent))
    end = next(e for e in events if isinstance(e, ReRankEndEvent))
    assert (start.top_n, start.model_name, len(start.nodes)) == (2, "table", 4)
    assert ids(end.nodes) == ids(out)


def test_needs_a_query_and_handles_empty():
    reranker = ModelRerank(TableScorer(TABLE))
    with pytest.raises(ValueError, match="needs the query"):
        reranker.postprocess_nodes(nodes4())
    assert reranker.postprocess_nodes([], query_str="q") == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top_n": 0}, "top_n must be >= 1 or None (keep all), got 0"),
        ({"batch_size": 0}, "batch_size must be >= 1, got 0"),
        ({"max_length": -5}, "max_length must be >= 1 characters or None (whole text), got -5"),
        ({"on_error": "ignore"}, "on_error must be one of ['fallback', 'raise'], got 'ignore'"),
    ],
)
def test_validation_names_value_and_range(kwargs, message):
    with pytest.raises(ValueError) as info:
        ModelRerank(TableScorer(TABLE), **kwargs)
    assert str(info.value) == message


def test_rejects_non_scorer_and_unknown_kwargs():
    with pytest.raises(TypeError, match="scorer must be a Scorer"):
        ModelRerank(lambda q, t: [])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ModelRerank(TableScorer(TABLE), topn=3)  # type: ignore[call-arg]


def test_llm_scorer_prompts_are_exposed_and_updatable():
    from llama_index.core.prompts import PromptTemplate

    reranker = ModelRerank(LLMScorer(ScriptedLLM.fixed("Doc: 1")))
    assert sorted(reranker.get_prompts()) == ["scorer:listwise_prompt", "scorer:pointwise_prompt"]
    reranker.update_prompts({"scorer:listwise_prompt": PromptTemplate("{context_str}|{query_str}|{num_docs}")})
    assert reranker.scorer.listwise_prompt.template == "{context_str}|{query_str}|{num_docs}"


def test_from_defaults_uses_the_local_embedding_scorer(embed_model):
    reranker = ModelRerank.from_defaults(embed_model=embed_model, top_n=1)
    assert isinstance(reranker.scorer, EmbeddingScorer)
    nodes = make_nodes(["Paris is the capital of France.", "Photosynthesis happens in chloroplasts."], [0.9, 0.8])
    out = reranker.postprocess_nodes(nodes, query_bundle=QueryBundle("Where do plants make sugar from light?"))
    assert ids(out) == ["n1"]
    with pytest.raises(ValueError, match="either scorer or embed_model"):
        ModelRerank.from_defaults(TableScorer(TABLE), embed_model=embed_model)
