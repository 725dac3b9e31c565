"""``fit_blocks``: one token budget over every block of a turn's prompt, cut lowest priority first.

Pure: takes the blocks a turn assembled (each a list of items in the order the block keeps them) and a token counter,
returns a :class:`BlockReport` naming each block, its tokens before and after, the items kept, and every item cut
and why. The budget is :func:`~llama_index_convrag.chat.budget.compute_budget` (``floor(budget_ratio *
(context_window - reserved_output))``), as for :func:`~llama_index_convrag.chat.budget.message_fit_in`.

Blocks named in :data:`FIXED` (the system prompt, the question) are never cut; if they alone exceed the budget,
:class:`BudgetExceededError` names the numbers. A block may first be capped on its own (``limits``: the evidence's
``max_tokens_limit``). Then the others are cut in ``cut_order`` (default :data:`CUT_ORDER`: the recent history
first, as the sliding remainder, then recalled messages, a core ``Memory``'s blocks, user facts, the summary and
last the retrieved evidence), item by item from each block's cut end: the history's oldest turn, the recalled
message, the core block and the evidence chunk ranked lowest, the oldest fact, the summary whole.

Evidence widened to its neighbours (``narrow_chunks`` gives what each chunk reads without them) is cut back to its
narrow text, lowest-ranked first, before anything is cut, under the evidence's own cap and under the budget, as
:func:`~llama_index_convrag.chat.budget.message_fit_in` does: widening only takes room nothing else needs, with memory
on or off. Each cut-back is a :class:`Dropped` of section ``widening`` (its ``tokens``: those saved).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from llama_index_convrag.chat.budget import (DEFAULT_BUDGET_RATIO, WIDENING, Dropped, TokenCounter, TrimReport,
                                             compute_budget)
from llama_index_convrag.errors import BudgetExceededError, ConfigurationError

FIXED = ("system", "question")
"""Blocks that are never cut."""
CUT_ORDER = ("history", "recalled", "memory_blocks", "facts", "summary", "evidence")
"""Default order of cutting (first cut first)."""
BLOCK_NAMES = FIXED + CUT_ORDER
#: Where each block is cut from: ``oldest`` (its first item) or ``lowest`` (its last item: items are best first).
CUT_END = {"history": "oldest", "recalled": "lowest", "memory_blocks": "lowest", "facts": "oldest",
           "summary": "lowest", "evidence": "lowest"}
#: The prompt's order of the blocks (what the model reads first).
PROMPT_ORDER = ("system", "memory_blocks", "facts", "summary", "recalled", "evidence", "history", "question")


@dataclass
class BlockReport:
    """What fitted: the budget, per block its tokens before and after cutting and the kept item indices, each cut
    item (``Dropped.section`` is the block's name; ``widening``: an evidence chunk cut back to its narrow text) and
    the evidence chunks still read widened (``widened``)."""

    budget: int
    context_window: int
    reserved_output: int
    budget_ratio: float
    tokens_before: Dict[str, int]
    tokens: Dict[str, int]
    kept: Dict[str, List[int]]
    dropped: List[Dropped] = field(default_factory=list)
    cut_order: Tuple[str, ...] = CUT_ORDER
    widened: List[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.tokens.values())

    def cut(self, block: str) -> List[int]:
        """Indices of ``block``'s items that were cut."""
        return [d.index for d in self.dropped if d.section == block]

    @property
    def narrowed(self) -> List[int]:
        """The evidence chunks whose widening was cut (they are read narrow), as :attr:`TrimReport.narrowed`."""
        return [d.index for d in self.dropped if d.section == WIDENING]

    @property
    def kept_history(self) -> List[int]:
        """The history turns kept (as :attr:`TrimReport.kept_history`)."""
        return list(self.kept.get("history", []))

    @property
    def kept_chunks(self) -> List[int]:
        """The evidence chunks kept (as :attr:`TrimReport.kept_chunks`)."""
        return list(self.kept.get("evidence", []))

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready; ``kept_history`` / ``kept_chunks`` as in :meth:`TrimReport.to_dict`, for its readers."""
        return {"budget": self.budget, "context_window": self.context_window, "reserved_output": self.reserved_output,
                "budget_ratio": self.budget_ratio, "tokens_before": dict(self.tokens_before),
                "tokens": dict(self.tokens), "kept": {k: list(v) for k, v in self.kept.items()},
                "dropped": [asdict(d) for d in self.dropped], "cut_order": list(self.cut_order), "total": self.total,
                "kept_history": self.kept_history, "kept_chunks": self.kept_chunks, "widened": list(self.widened)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BlockReport":
        data = {k: v for k, v in data.items() if k not in ("total", "kept_history", "kept_chunks")}
        data["dropped"] = [Dropped(**d) for d in data.get("dropped", [])]
        data["cut_order"] = tuple(data.get("cut_order", CUT_ORDER))
        return cls(**data)

    def to_trim_report(self) -> TrimReport:
        """The same fit as a :class:`TrimReport` (tokens per block; ``kept_history`` / ``kept_chunks`` are the
        history's and the evidence's), for readers of the turn record's ``trim_report``."""
        return TrimReport(budget=self.budget, context_window=self.context_window,
                          reserved_output=self.reserved_output, budget_ratio=self.budget_ratio,
                          tokens=dict(self.tokens), kept_history=list(self.kept.get("history", [])),
                          kept_chunks=list(self.kept.get("evidence", [])), dropped=list(self.dropped),
                          widened=list(self.widened))


def _check(blocks: Mapping[str, Sequence[str]], cut_order: Sequence[str],
           limits: Mapping[str, Optional[int]]) -> Tuple[str, ...]:
    unknown = sorted((set(blocks) | set(limits)) - set(BLOCK_NAMES))
    if unknown:
        raise ConfigurationError(f"unknown block(s) {unknown}; accepted: {list(BLOCK_NAMES)}")
    for name, cap in limits.items():
        if name in FIXED:
            raise ConfigurationError(f"block {name!r} is never cut, so it takes no limit; limits apply to "
                                     f"{list(CUT_ORDER)}")
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            raise ConfigurationError(f"the limit of block {name!r} must be an int >= 0 or None, got {cap!r}")
    for name, items in blocks.items():
        if isinstance(items, str) or not all(isinstance(t, str) for t in items):
            raise ConfigurationError(f"block {name!r} must be a list of strings (its items), got {items!r}")
    order = tuple(cut_order)
    if sorted(order) != sorted(CUT_ORDER):
        raise ConfigurationError(f"cut_order must name each of {list(CUT_ORDER)} once, got {list(order)}")
    return order


def fit_blocks(
    blocks: Mapping[str, Sequence[str]],
    *,
    count_tokens: TokenCounter,
    context_window: int,
    reserved_output: int,
    budget_ratio: float = DEFAULT_BUDGET_RATIO,
    cut_order: Sequence[str] = CUT_ORDER,
    limits: Optional[Mapping[str, Optional[int]]] = None,
    narrow_chunks: Optional[Sequence[Optional[str]]] = None,
) -> BlockReport:
    """Fit ``blocks`` (name -> items; names from :data:`BLOCK_NAMES`, absent blocks are empty) into the budget;
    ``limits``: a block's own token cap (None: none), applied first from its cut end (reason ``max_tokens_limit``);
    ``narrow_chunks[i]``: evidence item ``i`` without its widening (None: not widened)."""
    limits = dict(limits) if limits is not None else {}
    order = _check(blocks, cut_order, limits)
    evidence = len(blocks.get("evidence", ()))
    if narrow_chunks is not None and len(narrow_chunks) != evidence:
        raise ConfigurationError(f"narrow_chunks must give one entry per evidence item ({evidence}), "
                                 f"got {len(narrow_chunks)}")
    budget = compute_budget(context_window, reserved_output, budget_ratio)
    counts = {name: [count_tokens(t) for t in blocks.get(name, ())] for name in BLOCK_NAMES}
    before = {name: sum(c) for name, c in counts.items()}
    fixed = sum(before[n] for n in FIXED)
    if fixed > budget:
        raise BudgetExceededError(
            f"system prompt ({before['system']}) + question ({before['question']}) = {fixed} tokens exceed the budget "
            f"of {budget} tokens (floor({budget_ratio} * ({context_window} - {reserved_output}))); shorten the "
            "question or the prompt")
    kept = {name: list(range(len(counts[name]))) for name in BLOCK_NAMES}
    tokens = dict(before)
    total = sum(tokens.values())
    dropped: List[Dropped] = []

    widened = [i for i, n in enumerate(narrow_chunks or ()) if n is not None]

    def cut_one(name: str, reason: str) -> None:
        nonlocal total
        i = kept[name].pop(0) if CUT_END[name] == "oldest" else kept[name].pop()
        tokens[name] -= counts[name][i]
        total -= counts[name][i]
        dropped.append(Dropped(name, i, counts[name][i], reason))

    def narrow(over: Callable[[], bool], reason: str) -> None:
        """Cut widened evidence back, lowest-ranked first, while ``over()`` holds and one is left."""
        nonlocal total
        while widened and over():
            i = widened.pop()
            saved = counts["evidence"][i] - count_tokens(narrow_chunks[i])  # type: ignore[index, arg-type]
            counts["evidence"][i] -= saved
            tokens["evidence"] -= saved
            total -= saved
            dropped.append(Dropped(WIDENING, i, saved, reason))

    for name, cap in limits.items():
        if name == "evidence" and cap is not None:
            narrow(lambda: tokens["evidence"] > cap, f"max_tokens_limit {cap}")  # noqa: B023 - called at once
        while cap is not None and tokens[name] > cap and kept[name]:
            cut_one(name, f"max_tokens_limit {cap}")
    widened = [i for i in widened if i in kept["evidence"]]
    narrow(lambda: total > budget, f"budget {budget}: widening cut first, lowest-ranked chunk first")
    for name in order:
        which = "oldest first" if CUT_END[name] == "oldest" else "lowest-ranked first"
        while total > budget and kept[name]:
            cut_one(name, f"budget {budget}: {name} cut {which}")
    return BlockReport(budget=budget, context_window=context_window, reserved_output=reserved_output,
                       budget_ratio=budget_ratio, tokens_before=before, tokens=tokens, kept=kept, dropped=dropped,
                       cut_order=order, widened=[i for i in widened if i in kept["evidence"]])


def assemble(blocks: Mapping[str, Sequence[str]], report: BlockReport) -> List[Tuple[str, List[str]]]:
    """The kept items of each non-empty block as ``(block, items)``, in :data:`PROMPT_ORDER`: what the model saw,
    for the turn record (a block's heading, if any, belongs in its first item, where it is counted)."""
    out = []
    for name in PROMPT_ORDER:
        items = [blocks[name][i] for i in report.kept.get(name, []) if name in blocks]
        if items:
            out.append((name, items))
    return out
