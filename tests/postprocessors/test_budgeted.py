from __future__ import annotations

import itertools
import logging
import math

import numpy as np
import pytest
from llama_index.core.schema import QueryBundle

from llama_index_convrag.postprocessors import BudgetedCoverageSelector, greedy_budgeted
from llama_index_convrag.postprocessors.budgeted import approx_token_count, coverage_problem, coverage_value
from llama_index_convrag.rank_trail import get_trail
from tests.postprocessors.conftest import ids, make_nodes

# targets: the query, then items 0..2; w = query weight 1, 0.3 per item
SIM = np.array([[0.9, 0.8, 0.3], [1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]])
W = [1.0, 0.3, 0.3, 0.3]


def test_coverage_value_on_hand_built_matrix():
    assert coverage_value(SIM, W, []) == 0.0
    assert coverage_value(SIM, W, [0]) == pytest.approx(0.9 + 0.3 * 2.0)
    assert coverage_value(SIM, W, [1, 2]) == pytest.approx(0.8 + 0.3 * (0.9 + 1.0 + 1.0))


def test_greedy_uses_cost_scaled_gains():
    # ratios 1.5/100, 1.43/50, 0.69/30 -> item 1; then only item 2 fits (gain 0.3 * 0.8)
    result = greedy_budgeted(SIM, W, [100, 50, 30], 120)
    assert result.picks == [1, 2]
    assert result.gains == pytest.approx([1.43, 0.24])
    assert result.value == pytest.approx(1.67)
    assert result.value == pytest.approx(coverage_value(SIM, W, result.picks))
    assert (result.cost, result.strategy) == (80.0, "cost-scaled")


def test_best_single_item_safeguard():
    # the cost-scaled pass takes the cheap weak item and can then no longer afford the strong one
    result = greedy_budgeted([[0.1, 1.0]], [1.0], [1, 100], 100, cost_exponent=1.0)
    assert (result.picks, result.value, result.strategy) == ([1], 1.0, "uniform")


def test_cost_scaled_pass_beats_uniform_pass():
    # uniform grabs the single best item (1.0, fills the budget); cost-scaled fits two cheaper items worth 1.8
    sim = [[1.0, 0.9, 0.0], [0.0, 0.0, 0.9]]
    result = greedy_budgeted(sim, [1.0, 1.0], [100, 50, 50], 100, cost_exponent=1.0)
    assert (result.picks, result.strategy) == ([1, 2], "cost-scaled")
    assert result.value == pytest.approx(1.8)
    only_scaled = greedy_budgeted([[0.2, 1.0]], [1.0], [1, 100], 100, cost_exponent=0.0)
    assert only_scaled.strategy == "cost-scaled" and only_scaled.picks == [1]


def test_modular_relevance_reward_is_added():
    assert coverage_value(SIM, W, [1, 2], modular=[0.0, 0.5, 0.25]) == pytest.approx(1.67 + 0.75)
    result = greedy_budgeted([[0.5, 0.5]], [1.0], [1, 1], 1, modular=[0.0, 0.1])
    assert (result.picks, result.value) == ([1], 0.6)


def test_nothing_fits():
    result = greedy_budgeted(SIM, W, [200, 300, 400], 100)
    assert (result.picks, result.value) == ([], 0.0)


def test_approximation_bound_on_random_instances():
    rng = np.random.default_rng(7)
    for _ in range(30):
        sim = rng.uniform(0, 1, size=(6, 5))
        weights = rng.uniform(0, 1, size=6)
        costs = rng.integers(1, 10, size=5).astype(float)
        budget = 12.0
        best = max(coverage_value(sim, weights, s) for r in range(6) for s in itertools.combinations(range(5), r)
                   if costs[list(s)].sum() <= budget)
        got = greedy_budgeted(sim, weights, costs, budget)
        assert got.cost <= budget
        assert got.value >= (1 - 1 / math.e) / 2 * best - 1e-12


def test_coverage_problem_clips_negative_cosines():
    sim, weights, rel = coverage_problem(np.array([1.0, 0.0]), np.array([[1.0, 0.0], [-1.0, 0.0]]), 2.0)
    assert sim.tolist() == [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    assert weights.tolist() == [2.0, 0.5, 0.0]
    assert rel.tolist() == [1.0, 0.0]


VECS = [[1.0, 0.0, 0.0], [0.995, 0.0998, 0.0], [0.6, 0.0, 0.8]]


@pytest.mark.parametrize("use_async", [False, True])
async def test_selector_keeps_incoming_order_and_records_picks(use_async, events):
    nodes = make_nodes(["x" * 400, "y" * 200, "z" * 200], [0.9, 0.8, 0.7], embeddings=VECS)  # 100/50/50 tokens
    selector = BudgetedCoverageSelector(100)
    query = QueryBundle("q", embedding=[1.0, 0.0, 0.0])
    out = await selector.apostprocess_nodes(nodes, query) if use_async else selector.postprocess_nodes(nodes, query)
    assert ids(out) == ["n1", "n2"]  # two cheaper passages cover more than the single long one
    assert [n.score for n in out] == [0.8, 0.7]
    assert [(t["pick"], t["cost"], t["rank"], t["prev_rank"]) for t in (get_trail(n)[-1] for n in out)] == [
        (1, 50, 1, 2), (2, 50, 2, 3)]
    end = [e for e in events if e.class_name() == "NodeSelectionEndEvent"][-1]
    assert end.details["cost"] == 100.0 and end.details["strategy"] == "cost-scaled"


def test_nothing_fits_or_helps_logs_a_warning(caplog):
    caplog.set_level(logging.WARNING)
    out = BudgetedCoverageSelector(10).postprocess_nodes(make_nodes(["x" * 400], embeddings=[[1.0]]),
                                                         QueryBundle("q", embedding=[1.0]))
    assert out == [] and "no passage fits the token budget of 10 (smallest costs 100)" in caplog.text
    orthogonal = make_nodes(["a", "b"], embeddings=[[1.0, 0.0], [1.0, 0.0]])
    out = BudgetedCoverageSelector(10).postprocess_nodes(orthogonal, QueryBundle("q", embedding=[0.0, 1.0]))
    assert out == [] and "no passage within the budget of 10 tokens covers the query" in caplog.text


def test_custom_token_counter():
    nodes = make_nodes(["one two", "three four five"], embeddings=[[1.0, 0.0], [0.0, 1.0]])
    selector = BudgetedCoverageSelector(2, token_counter=lambda t: len(t.split()))
    assert ids(selector.postprocess_nodes(nodes, QueryBundle("q", embedding=[1.0, 0.0]))) == ["n0"]
    assert approx_token_count("") == 1 and approx_token_count("abcde") == 2


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [((0,), {}, "token_budget must be an integer >= 1, got 0"),
     ((100,), {"query_weight": -1.0}, "query_weight must be >= 0, got -1.0"),
     ((100,), {"cost_exponent": 2.0}, "cost_exponent must be in [0, 1], got 2.0"),
     ((100,), {"relevance_weight": -1.0}, "relevance_weight must be >= 0, got -1.0")],
)
def test_validation(args, kwargs, message):
    with pytest.raises(ValueError) as info:
        BudgetedCoverageSelector(*args, **kwargs)
    assert str(info.value) == message
