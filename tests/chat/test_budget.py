"""message_fit_in on hand-built inputs with a word counter: exact numbers, order of dropping, never over budget."""

import random

import pytest

from llama_index_convrag.chat.budget import (
    BudgetExceededError,
    Dropped,
    TrimReport,
    compute_budget,
    message_fit_in,
)


def words(text: str) -> int:
    return len(text.split())


def _w(n: int, tag: str = "w") -> str:
    return " ".join([tag] * n)


def test_budget_formula() -> None:
    assert compute_budget(4096, 256, 0.95) == 3648  # floor(0.95 * 3840)
    assert compute_budget(100, 0, 1.0) == 100


@pytest.mark.parametrize("kwargs, message", [
    ({"context_window": 100, "reserved_output": 0, "budget_ratio": 0.0}, r"budget_ratio must be in \(0, 1\], got 0.0"),
    ({"context_window": 100, "reserved_output": -1}, r"reserved_output must be >= 0, got -1"),
    ({"context_window": 100, "reserved_output": 100}, r"context_window \(100\) must exceed reserved_output \(100\)"),
])
def test_budget_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compute_budget(**kwargs)


def test_everything_fits() -> None:
    r = message_fit_in(question=_w(5), history=[_w(10), _w(10)], chunks=[_w(20)], system=_w(3),
                       extra={"x": _w(2)}, count_tokens=words, context_window=110, reserved_output=10,
                       budget_ratio=1.0)
    assert r.tokens == {"system": 3, "question": 5, "extra": 2, "history": 20, "context": 20}
    assert (r.total, r.budget, r.kept_history, r.kept_chunks, r.dropped) == (50, 100, [0, 1], [0], [])


def test_drops_oldest_history_first_then_lowest_chunks() -> None:
    r = message_fit_in(question=_w(10), history=[_w(30), _w(30), _w(30)], chunks=[_w(40), _w(40), _w(40)],
                       count_tokens=words, context_window=100, reserved_output=0, budget_ratio=1.0)
    assert [(d.section, d.index) for d in r.dropped] == [
        ("history", 0), ("history", 1), ("history", 2), ("context", 2)]
    assert (r.kept_history, r.kept_chunks, r.total) == ([], [0, 1], 90)
    assert r.dropped[0] == Dropped("history", 0, 30, "budget 100: oldest turn first")
    assert r.dropped[3].reason == "budget 100: lowest-ranked chunk first"


def test_keeps_newest_history_when_room() -> None:
    r = message_fit_in(question=_w(10), history=[_w(30), _w(30), _w(30)], chunks=[_w(20)],
                       count_tokens=words, context_window=100, reserved_output=0, budget_ratio=1.0)
    assert (r.kept_history, r.kept_chunks) == ([1, 2], [0])


def test_max_context_tokens_caps_chunks_before_budget() -> None:
    r = message_fit_in(question="q", chunks=[_w(10), _w(10), _w(10)], count_tokens=words, context_window=1000,
                       reserved_output=0, max_context_tokens=25)
    assert r.kept_chunks == [0, 1]
    assert r.dropped == [Dropped("context", 2, 10, "max_tokens_limit 25")]


def test_question_never_dropped_raises_when_alone_too_big() -> None:
    with pytest.raises(BudgetExceededError, match=r"question \(120\) .* exceed the budget of 95 tokens"):
        message_fit_in(question=_w(120), count_tokens=words, context_window=100, reserved_output=0)


def test_property_never_exceeds_and_drops_oldest_first() -> None:
    rng = random.Random(7)
    for _ in range(500):
        history = [_w(rng.randint(1, 60)) for _ in range(rng.randint(0, 12))]
        chunks = [_w(rng.randint(1, 80)) for _ in range(rng.randint(0, 10))]
        question, system = _w(rng.randint(1, 20)), _w(rng.randint(0, 30))
        window, reserved = rng.randint(60, 900), rng.randint(0, 50)
        ratio = rng.choice([0.5, 0.8, 0.95, 1.0])
        cap = rng.choice([None, rng.randint(0, 300)])
        try:
            r = message_fit_in(question=question, history=history, chunks=chunks, system=system,
                               count_tokens=words, context_window=window, reserved_output=reserved,
                               budget_ratio=ratio, max_context_tokens=cap)
        except BudgetExceededError:
            assert words(question) + words(system) > compute_budget(window, reserved, ratio)
            continue
        assert r.total <= r.budget == compute_budget(window, reserved, ratio)
        assert r.tokens["question"] == words(question)
        # kept history is a suffix (newest turns), kept chunks a prefix (best ranks)
        assert r.kept_history == list(range(len(history) - len(r.kept_history), len(history)))
        assert r.kept_chunks == list(range(len(r.kept_chunks)))
        # chunks are only trimmed for the budget once all history is gone
        if any(d.section == "context" and d.reason.startswith("budget") for d in r.dropped):
            assert r.kept_history == []
        if cap is not None:
            assert r.tokens["context"] <= cap
        # minimal trimming: re-adding the last dropped item would exceed the budget
        budget_drops = [d for d in r.dropped if d.reason.startswith("budget")]
        if budget_drops:
            assert r.total + budget_drops[-1].tokens > r.budget


def test_report_round_trips() -> None:
    r = message_fit_in(question="a b", history=[_w(50)], count_tokens=words, context_window=40, reserved_output=0)
    again = TrimReport.from_dict(r.to_dict())
    assert again == r and r.to_dict()["total"] == r.total


def test_cached_token_counter_counts_each_text_once_and_is_bounded():
    from llama_index_convrag.chat.budget import CachedTokenCounter

    calls = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text.split())

    cached = CachedTokenCounter(count, max_size=2)
    assert [cached("a b"), cached("a b"), cached("c"), cached("d e f"), cached("a b")] == [2, 2, 1, 3, 2]
    assert calls == ["a b", "c", "d e f", "a b"]  # "a b" was evicted by the third distinct text
    with pytest.raises(ValueError, match="max_size must be >= 1, got 0"):
        CachedTokenCounter(count, max_size=0)


def test_dropping_many_history_turns_keeps_the_newest_that_fit():
    report = message_fit_in(question="q", count_tokens=lambda t: len(t), context_window=1000, reserved_output=0,
                            history=["x" * 100] * 50, budget_ratio=0.5)
    assert report.kept_history == [46, 47, 48, 49] and report.tokens["history"] == 400
    assert [d.index for d in report.dropped] == list(range(46))


def test_widened_chunks_are_cut_back_lowest_ranked_first_before_history_or_chunks() -> None:
    chunks, narrow = [_w(40), _w(40), _w(40)], [_w(10), None, _w(10)]
    roomy = message_fit_in(question=_w(10), history=[_w(30)], chunks=chunks, narrow_chunks=narrow,
                           count_tokens=words, context_window=1000, reserved_output=0, budget_ratio=1.0)
    assert (roomy.widened, roomy.dropped, roomy.narrowed) == ([0, 2], [], [])
    r = message_fit_in(question=_w(10), history=[_w(30)], chunks=chunks, narrow_chunks=narrow,
                       count_tokens=words, context_window=140, reserved_output=0, budget_ratio=1.0)
    reason = "budget 140: widening cut first, lowest-ranked chunk first"
    assert r.dropped == [Dropped("widening", 2, 30, reason)]
    assert (r.widened, r.narrowed, r.kept_history, r.kept_chunks, r.tokens["context"]) == ([0], [2], [0], [0, 1, 2], 90)
    # all widening cut and still over: then the oldest history, then the lowest-ranked chunk, as before
    tight = message_fit_in(question=_w(10), history=[_w(30)], chunks=chunks, narrow_chunks=narrow,
                           count_tokens=words, context_window=60, reserved_output=0, budget_ratio=1.0)
    assert [(d.section, d.index) for d in tight.dropped] == [("widening", 2), ("widening", 0), ("history", 0),
                                                             ("context", 2)]
    assert (tight.widened, tight.kept_chunks, tight.total) == ([], [0, 1], 60)


def test_max_context_tokens_cuts_widening_before_chunks_and_the_report_keeps_it() -> None:
    r = message_fit_in(question="q", chunks=[_w(30), _w(30)], narrow_chunks=[_w(10), _w(10)], count_tokens=words,
                       context_window=1000, reserved_output=0, max_context_tokens=45)
    assert r.dropped == [Dropped("widening", 1, 20, "max_tokens_limit 45")]
    assert (r.kept_chunks, r.widened, r.tokens["context"]) == ([0, 1], [0], 40)
    assert TrimReport.from_dict(r.to_dict()) == r and r.to_dict()["widened"] == [0]
    old = {k: v for k, v in r.to_dict().items() if k != "widened"}  # a record written before widening
    assert TrimReport.from_dict(old).widened == []
    with pytest.raises(ValueError, match=r"narrow_chunks must give one entry per chunk \(2\), got 1"):
        message_fit_in(question="q", chunks=["a", "b"], narrow_chunks=["a"], count_tokens=words,
                       context_window=100, reserved_output=0)
