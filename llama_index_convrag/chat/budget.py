"""``message_fit_in``: fit system prompt, question, extra variables, history and retrieved context into a budget.

Pure: takes texts and a token counter, returns a :class:`TrimReport`. The budget is
``floor(budget_ratio * (context_window - reserved_output))``. Retrieved chunks are first capped by
``max_context_tokens`` (LangChain's ``max_tokens_limit``: lowest-ranked dropped first); then, while over budget, the
oldest history turns are dropped, then the lowest-ranked chunks. A chunk widened to its neighbours
(``narrow_chunks`` gives what it reads without them) is cut back to its narrow text, lowest-ranked first,
before anything else is trimmed: widening only takes room nothing else needs. The question, system prompt and
extra variables are never dropped; if they alone exceed the budget, :class:`BudgetExceededError` names the numbers.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from llama_index_convrag.errors import BudgetExceededError, ConfigurationError

TokenCounter = Callable[[str], int]
DEFAULT_BUDGET_RATIO = 0.95
WIDENING = "widening"


@dataclass
class Dropped:
    """One trimmed item: ``section`` is ``history`` (index = turn, oldest 0), ``context`` (index = rank, best 0) or
    ``widening`` (the chunk at that rank cut back to its narrow text; ``tokens`` saved)."""

    section: str
    index: int
    tokens: int
    reason: str


@dataclass
class TrimReport:
    """What fitted: budget, tokens per section after trimming, kept indices, the chunks read widened (``widened``:
    ranks), and what was dropped or cut back and why."""

    budget: int
    context_window: int
    reserved_output: int
    budget_ratio: float
    tokens: Dict[str, int]
    kept_history: List[int] = field(default_factory=list)
    kept_chunks: List[int] = field(default_factory=list)
    dropped: List[Dropped] = field(default_factory=list)
    widened: List[int] = field(default_factory=list)

    @property
    def narrowed(self) -> List[int]:
        """Ranks of the chunks whose widening was cut (they are read narrow)."""
        return [d.index for d in self.dropped if d.section == WIDENING]

    @property
    def total(self) -> int:
        return sum(self.tokens.values())

    def to_dict(self) -> Dict[str, Any]:
        data = {"budget": self.budget, "context_window": self.context_window, "reserved_output": self.reserved_output,
                "budget_ratio": self.budget_ratio, "tokens": dict(self.tokens), "kept_history": list(self.kept_history),
                "kept_chunks": list(self.kept_chunks), "dropped": [asdict(d) for d in self.dropped],
                "widened": list(self.widened)}
        data["total"] = self.total
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrimReport":
        data = {k: v for k, v in data.items() if k != "total"}
        data["dropped"] = [Dropped(**d) for d in data.get("dropped", [])]
        return cls(**data)


class CachedTokenCounter:
    """A token counter that remembers the counts of recent texts (history turns are counted once, not every turn)."""

    def __init__(self, count_tokens: TokenCounter, max_size: int = 4096) -> None:
        if max_size < 1:
            raise ConfigurationError(f"max_size must be >= 1, got {max_size!r}")
        self.count_tokens = count_tokens
        self.max_size = max_size
        self._counts: "OrderedDict[str, int]" = OrderedDict()

    def __call__(self, text: str) -> int:
        n = self._counts.get(text)
        if n is None:
            n = self._counts[text] = self.count_tokens(text)
            if len(self._counts) > self.max_size:
                self._counts.popitem(last=False)
        else:
            self._counts.move_to_end(text)
        return n


def compute_budget(context_window: int, reserved_output: int, budget_ratio: float = DEFAULT_BUDGET_RATIO) -> int:
    """``floor(budget_ratio * (context_window - reserved_output))``, validated."""
    if not 0 < budget_ratio <= 1:
        raise ConfigurationError(f"budget_ratio must be in (0, 1], got {budget_ratio!r}")
    if reserved_output < 0:
        raise ConfigurationError(f"reserved_output must be >= 0, got {reserved_output!r}")
    if context_window <= reserved_output:
        raise ConfigurationError(
            f"context_window ({context_window}) must exceed reserved_output ({reserved_output}); "
            "lower the reserved output tokens or use a model with a larger window"
        )
    return math.floor(budget_ratio * (context_window - reserved_output))


def message_fit_in(
    *,
    question: str,
    count_tokens: TokenCounter,
    context_window: int,
    reserved_output: int,
    history: Sequence[str] = (),
    chunks: Sequence[str] = (),
    system: str = "",
    extra: Optional[Mapping[str, str]] = None,
    budget_ratio: float = DEFAULT_BUDGET_RATIO,
    max_context_tokens: Optional[int] = None,
    narrow_chunks: Optional[Sequence[Optional[str]]] = None,
) -> TrimReport:
    """Trim ``history`` (formatted turns, oldest first) and ``chunks`` (best first) to fit the budget;
    ``narrow_chunks[i]`` is chunk ``i`` without its widening (None: not widened)."""
    if max_context_tokens is not None and max_context_tokens < 0:
        raise ConfigurationError(f"max_context_tokens must be >= 0, got {max_context_tokens!r}")
    if narrow_chunks is not None and len(narrow_chunks) != len(chunks):
        raise ConfigurationError(f"narrow_chunks must give one entry per chunk ({len(chunks)}), "
                                 f"got {len(narrow_chunks)}")
    budget = compute_budget(context_window, reserved_output, budget_ratio)
    extra_tokens = sum(count_tokens(v) for v in (extra or {}).values())
    fixed = {"system": count_tokens(system) if system else 0, "question": count_tokens(question),
             "extra": extra_tokens}
    if sum(fixed.values()) > budget:
        raise BudgetExceededError(
            f"system prompt ({fixed['system']}) + question ({fixed['question']}) + extra variables ({extra_tokens}) "
            f"= {sum(fixed.values())} tokens exceed the budget of {budget} tokens "
            f"(floor({budget_ratio} * ({context_window} - {reserved_output}))); shorten the question or the prompt"
        )
    hist_tokens = [count_tokens(t) for t in history]
    chunk_tokens = [count_tokens(c) for c in chunks]
    dropped: List[Dropped] = []
    widened = [i for i, n in enumerate(narrow_chunks or ()) if n is not None]

    def narrow(excess: int, reason: str) -> None:
        """Cut widened chunks back, lowest-ranked first, until ``excess`` tokens are saved or none is left."""
        while widened and excess > 0:
            i = widened.pop()
            saved = chunk_tokens[i] - count_tokens(narrow_chunks[i])  # type: ignore[index, arg-type]
            chunk_tokens[i] -= saved
            excess -= saved
            dropped.append(Dropped(WIDENING, i, saved, reason))

    kept_chunks = list(range(len(chunks)))
    if max_context_tokens is not None:
        narrow(sum(chunk_tokens) - max_context_tokens, f"max_tokens_limit {max_context_tokens}")
        while kept_chunks and sum(chunk_tokens[i] for i in kept_chunks) > max_context_tokens:
            i = kept_chunks.pop()
            dropped.append(Dropped("context", i, chunk_tokens[i], f"max_tokens_limit {max_context_tokens}"))
    kept_history = list(range(len(history)))

    hist_total = sum(hist_tokens)
    fixed_total = sum(fixed.values())
    widened = [i for i in widened if i in kept_chunks]
    narrow(fixed_total + hist_total + sum(chunk_tokens[i] for i in kept_chunks) - budget,
           f"budget {budget}: widening cut first, lowest-ranked chunk first")
    chunk_total = sum(chunk_tokens[i] for i in kept_chunks)
    first = 0  # history turns before ``first`` are dropped (running totals: linear in the history length)
    while fixed_total + hist_total + chunk_total > budget and first < len(history):
        hist_total -= hist_tokens[first]
        dropped.append(Dropped("history", first, hist_tokens[first], f"budget {budget}: oldest turn first"))
        first += 1
    kept_history = kept_history[first:]
    while fixed_total + hist_total + chunk_total > budget and kept_chunks:
        i = kept_chunks.pop()
        chunk_total -= chunk_tokens[i]
        dropped.append(Dropped("context", i, chunk_tokens[i], f"budget {budget}: lowest-ranked chunk first"))
    widened = [i for i in widened if i in kept_chunks]
    tokens = dict(fixed)
    tokens["history"] = hist_total
    tokens["context"] = chunk_total
    return TrimReport(budget=budget, context_window=context_window, reserved_output=reserved_output,
                      budget_ratio=budget_ratio, tokens=tokens, kept_history=kept_history, kept_chunks=kept_chunks,
                      dropped=dropped, widened=widened)
