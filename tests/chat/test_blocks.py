"""fit_blocks: one budget over a turn's blocks, cut lowest priority first, on hand-built blocks (1 word = 1 token)."""

from __future__ import annotations

import pytest

from llama_index_convrag.chat.blocks import BlockReport, assemble, fit_blocks
from llama_index_convrag.errors import BudgetExceededError, ConfigurationError


def words(text: str) -> int:
    return len(text.split())


BLOCKS = {
    "system": ["a b c d e"],  # 5
    "question": ["q q q"],  # 3
    "evidence": ["e1 e1 e1 e1", "e2 e2 e2 e2", "e3 e3 e3 e3"],  # 12, best first
    "summary": ["s s s s s s"],  # 6
    "facts": ["f1 f1", "f2 f2"],  # 4, oldest first
    "recalled": ["r1 r1 r1", "r2 r2 r2"],  # 6, best first
    "history": ["h1 h1 h1 h1", "h2 h2 h2 h2", "h3 h3 h3 h3"],  # 12, oldest first
}  # 48 in all


def fit(budget: int, **kw: object) -> BlockReport:
    return fit_blocks(BLOCKS, count_tokens=words, context_window=budget, reserved_output=0, budget_ratio=1.0, **kw)


def test_everything_fits_and_nothing_is_cut() -> None:
    r = fit(48)
    assert r.dropped == [] and r.total == 48 and r.kept["history"] == [0, 1, 2]


def test_history_goes_first_oldest_turn_first_then_recalled_lowest_first() -> None:
    r = fit(34)
    assert [(d.section, d.index) for d in r.dropped] == [("history", 0), ("history", 1), ("history", 2),
                                                        ("recalled", 1)]
    assert r.kept == {"system": [0], "question": [0], "evidence": [0, 1, 2], "summary": [0], "facts": [0, 1],
                      "recalled": [0], "history": [], "memory_blocks": []}
    assert r.tokens["history"] == 0 and r.tokens_before["history"] == 12 and r.total == 33
    assert r.dropped[0].reason == "budget 34: history cut oldest first"
    assert r.cut("recalled") == [1]


def test_evidence_is_cut_last_and_the_fixed_blocks_never() -> None:
    r = fit(12)
    assert r.kept["evidence"] == [0] and r.tokens["summary"] == 0 and r.tokens["facts"] == 0
    assert r.total == 12
    with pytest.raises(BudgetExceededError, match=r"system prompt \(5\) \+ question \(3\) = 8 tokens exceed the "
                                                  r"budget of 7 tokens"):
        fit(7)


def test_another_cut_order_and_the_report_round_trips() -> None:
    r = fit(40, cut_order=("recalled", "history", "memory_blocks", "facts", "summary", "evidence"))
    assert [(d.section, d.index) for d in r.dropped] == [("recalled", 1), ("recalled", 0), ("history", 0)]
    again = BlockReport.from_dict(r.to_dict())
    assert again == r and r.to_dict()["total"] == r.total == 38
    assert r.to_dict()["kept_chunks"] == r.kept_chunks == [0, 1, 2] and r.to_dict()["kept_history"] == [1, 2]
    trim = r.to_trim_report()
    assert trim.kept_history == [1, 2] and trim.kept_chunks == [0, 1, 2] and trim.tokens["recalled"] == 0
    assert assemble(BLOCKS, r)[0] == ("system", ["a b c d e"])
    assert [name for name, _ in assemble(BLOCKS, r)] == ["system", "facts", "summary", "evidence", "history",
                                                        "question"]


@pytest.mark.parametrize("blocks,order,message", [
    ({"notes": ["x"]}, None, r"unknown block\(s\) \['notes'\]; accepted: \['system', 'question', 'history'"),
    ({"history": "one string"}, None, "block 'history' must be a list of strings"),
    ({}, ("history",), r"cut_order must name each of \['history', 'recalled', 'memory_blocks', 'facts', 'summary', "
                       r"'evidence'\] once, got \['history'\]"),
])
def test_bad_input_is_named(blocks, order, message: str) -> None:
    kw = {} if order is None else {"cut_order": order}
    with pytest.raises(ConfigurationError, match=message):
        fit_blocks(blocks, count_tokens=words, context_window=100, reserved_output=0, **kw)


def test_a_block_limit_cuts_that_block_first_and_says_so() -> None:
    r = fit(48, limits={"evidence": 8})
    assert [(d.section, d.index, d.reason) for d in r.dropped] == [("evidence", 2, "max_tokens_limit 8")]
    assert r.tokens["evidence"] == 8 and r.total == 44
    assert fit(48, limits={"evidence": None}).dropped == []


def test_core_memory_blocks_are_cut_after_recalled_and_before_facts() -> None:
    blocks = {**BLOCKS, "memory_blocks": ["m1 m1", "m2 m2"]}  # 4 more: 52 in all
    r = fit_blocks(blocks, count_tokens=words, context_window=28, reserved_output=0, budget_ratio=1.0)
    assert [(d.section, d.index) for d in r.dropped] == [
        ("history", 0), ("history", 1), ("history", 2), ("recalled", 1), ("recalled", 0), ("memory_blocks", 1),
        ("memory_blocks", 0), ("facts", 0)]
    assert r.kept["facts"] == [1] and r.total == 28
    assert [name for name, _ in assemble(blocks, fit_blocks(blocks, count_tokens=words, context_window=100,
                                                            reserved_output=0))][:3] == ["system", "memory_blocks",
                                                                                         "facts"]


@pytest.mark.parametrize("limits,message", [
    ({"notes": 3}, r"unknown block\(s\) \['notes'\]"),
    ({"question": 3}, r"block 'question' is never cut, so it takes no limit"),
    ({"evidence": -1}, r"the limit of block 'evidence' must be an int >= 0 or None, got -1"),
])
def test_bad_limits_are_named(limits, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        fit(48, limits=limits)


# --- widened evidence: cut back to its matched chunk before anything is cut, as message_fit_in does --------------
NARROW = ["e1 e1", None, "e3"]  # evidence 0 and 2 widened: 2 and 3 tokens saved when cut back


def test_widened_evidence_is_cut_back_lowest_ranked_first_before_any_block_is_cut() -> None:
    r = fit(44, narrow_chunks=NARROW)
    assert [(d.section, d.index, d.tokens) for d in r.dropped] == [("widening", 2, 3), ("widening", 0, 2)]
    assert r.dropped[0].reason == "budget 44: widening cut first, lowest-ranked chunk first"
    assert r.narrowed == [2, 0] and r.widened == [] and r.kept["history"] == [0, 1, 2] and r.total == 43
    assert r.tokens["evidence"] == 7 and r.tokens_before["evidence"] == 12
    again = BlockReport.from_dict(r.to_dict())
    assert again == r and r.to_dict()["widened"] == [] and r.cut("evidence") == []
    assert r.to_trim_report().narrowed == [2, 0]


def test_only_the_widening_that_must_go_is_cut_and_the_rest_is_reported_widened() -> None:
    r = fit(45, narrow_chunks=NARROW)
    assert [(d.section, d.index) for d in r.dropped] == [("widening", 2)] and r.widened == [0]
    assert fit(48, narrow_chunks=NARROW).widened == [0, 2]  # everything fits: both read widened


def test_when_cutting_back_is_not_enough_the_blocks_are_cut_in_their_order() -> None:
    r = fit(34, narrow_chunks=NARROW)
    assert [(d.section, d.index) for d in r.dropped] == [("widening", 2), ("widening", 0), ("history", 0),
                                                        ("history", 1), ("history", 2)]
    assert r.total == 31 and r.kept["recalled"] == [0, 1]  # without the widening's 5 tokens: recalled 1 goes too


def test_the_evidence_cap_cuts_widening_back_before_it_drops_a_chunk() -> None:
    r = fit(48, limits={"evidence": 9}, narrow_chunks=NARROW)
    assert [(d.section, d.index, d.reason) for d in r.dropped] == [("widening", 2, "max_tokens_limit 9")]
    assert r.tokens["evidence"] == 9 and r.kept["evidence"] == [0, 1, 2] and r.widened == [0]
    r = fit(48, limits={"evidence": 6}, narrow_chunks=NARROW)
    assert [(d.section, d.index) for d in r.dropped] == [("widening", 2), ("widening", 0), ("evidence", 2)]
    assert r.tokens["evidence"] == 6 and r.widened == []


def test_narrow_chunks_must_match_the_evidence() -> None:
    with pytest.raises(ConfigurationError, match=r"narrow_chunks must give one entry per evidence item \(3\), got 1"):
        fit(48, narrow_chunks=["x"])
