"""Retrieval-only question rewriting: strategies ``llm`` (condense prompt), ``contextual`` (no LLM: salient, recent
history terms, see :mod:`~llama_index_convrag.conversational.contextualize`), ``concat`` (no LLM) and ``none``.

The rewrite conditions on the last ``last_n_turns`` user turns (a user message and the answers that followed it),
fitted into ``max_history_tokens`` by :func:`fit_history` (answers are shortened before any user turn is dropped, and
the window is never emptied). An optional trigger skips the rewrite for self-contained questions. The model's reply
is cleaned by :func:`~llama_index_convrag.conversational.rewrite_output.parse_rewrite`; a failing, empty or rejected LLM
rewrite (an answer, a refusal) falls back to the original question and records why. LLM rewrites are cached by
(history message ids, message id, model).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from llama_index.core.base.llms.generic_utils import messages_to_history_str
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.conversational.contextualize import (DEFAULT_RULES, ContextRules, Contextualized,
                                                              contextualize, history_turns)
from llama_index_convrag.conversational.query import ConversationalQuery
from llama_index_convrag.conversational.rewrite_output import parse_rewrite
from llama_index_convrag.conversational.triggers import TriggerDecision, needs_rewrite
from llama_index_convrag.prompts.chat import DEFAULT_CONDENSE_PROMPT

STRATEGIES = ("llm", "contextual", "concat", "none")
CONTEXTUAL_MAX_TURNS = 16
"""User turns ``contextual`` reads: the conversation's first (its opening subject) and the latest 15 (recency decay
leaves older turns a negligible weight)."""
HistoryFormatter = Callable[[Sequence[ChatMessage]], str]
TokenCounter = Callable[[str], int]
Trigger = Callable[[str], TriggerDecision]
CacheKey = Tuple[Tuple[str, ...], str, str]


@dataclass
class RewriteResult:
    """The retrieval query and how it was obtained."""

    query: str
    strategy: str
    used_llm: bool = False
    latency_ms: float = 0.0
    fallback_reason: Optional[str] = None
    skipped_reason: Optional[str] = None
    cache_hit: bool = False
    explanation: Optional[Dict[str, Any]] = None
    cleaning: Tuple[str, ...] = ()
    """Steps that cleaned the model's reply ("label", "quotes", "kept 1 of 3 lines"...)."""
    shortened_answers: int = 0
    """Assistant answers cut short to fit the window into ``max_history_tokens``."""
    plan: Optional[Contextualized] = None
    """The ``contextual`` decision behind ``query`` (which history terms were added, and how much they weigh)."""

    def retrieval_bundle(self) -> ConversationalQuery:
        """The query to retrieve with: ``query`` carrying :attr:`plan`, for a fusing retriever."""
        return ConversationalQuery(self.query, plan=self.plan)


@dataclass
class _Plan:
    result: Optional[RewriteResult]
    history_str: str = ""
    key: Optional[CacheKey] = None
    shortened_answers: int = 0
    earlier: Tuple[str, ...] = ()


def _content_id(message: ChatMessage) -> str:
    return "h:" + hashlib.sha1(f"{message.role}\x00{message.content}".encode("utf-8")).hexdigest()[:16]


def select_history(
    history: Sequence[ChatMessage], last_n_turns: int, *, user_only: bool = False
) -> List[int]:
    """Indices of the messages of the last ``last_n_turns`` user turns (pure)."""
    user_positions = [i for i, m in enumerate(history) if m.role == MessageRole.USER]
    if last_n_turns == 0 or not user_positions:
        return []
    start = user_positions[-last_n_turns] if len(user_positions) >= last_n_turns else user_positions[0]
    return [i for i in range(start, len(history)) if not user_only or history[i].role == MessageRole.USER]


# One unit per CJK character, else one per whitespace-separated word: cuts work for Chinese text without spaces.
_UNIT = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\s\u3400-\u9fff\uf900-\ufaff]+")
TRUNCATION_MARK = " …"


def _head(message: ChatMessage, cap: int) -> ChatMessage:
    """``message`` cut after ``cap`` units (words, or CJK characters), marked with ``TRUNCATION_MARK``."""
    text = message.content or ""
    ends = [m.end() for m in _UNIT.finditer(text)]
    if len(ends) <= cap:
        return message
    return ChatMessage(role=message.role, content=text[:ends[cap - 1]] + TRUNCATION_MARK if cap > 0 else "…")


def _units(message: ChatMessage) -> int:
    return len(_UNIT.findall(message.content or ""))


def _largest_fitting(upper: int, fits: Callable[[int], bool]) -> int:
    """The largest ``n`` in ``0..upper`` with ``fits(n)``, for ``fits`` monotone decreasing and ``fits(0)`` true."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_history(
    messages: Sequence[ChatMessage], max_tokens: int, count_tokens: TokenCounter, formatter: HistoryFormatter
) -> Tuple[List[ChatMessage], int]:
    """Fit a rewrite window into ``max_tokens`` (pure). Returns the messages and how many answers were shortened.

    1. Assistant answers are cut to a common head of words (the longest head that fits); user turns stay whole.
    2. If the user turns alone do not fit, the answers are left out and the oldest user turns dropped.
    3. If the newest user turn alone does not fit, its head is kept. The window is empty only when not even one
       word fits.
    """
    picked = list(messages)

    def cost(window: Sequence[ChatMessage]) -> int:
        return count_tokens(formatter(window))

    if not picked or cost(picked) <= max_tokens:
        return picked, 0
    answers = [i for i, m in enumerate(picked) if m.role != MessageRole.USER]
    users = [m for m in picked if m.role == MessageRole.USER]

    def capped(cap: int) -> List[ChatMessage]:
        return [_head(m, cap) if i in answers else m for i, m in enumerate(picked)]

    if answers and users and cost(capped(1)) <= max_tokens:
        longest = max(_units(picked[i]) for i in answers)
        cap = _largest_fitting(longest, lambda n: n == 0 or cost(capped(n)) <= max_tokens)
        return capped(cap), sum(1 for i in answers if _units(picked[i]) > cap)
    window = users if users else picked[-1:]
    while len(window) > 1 and cost(window) > max_tokens:
        window = window[1:]
    if cost(window) <= max_tokens:
        return window, len(answers)
    last = window[0]
    cap = _largest_fitting(_units(last), lambda n: n == 0 or cost([_head(last, n)]) <= max_tokens)
    return ([_head(last, cap)] if cap > 0 else []), len(answers)


class QuestionRewriter(PromptMixin):
    """Turns (history, follow-up) into a retrieval query. See the module docstring."""

    def __init__(
        self,
        *,
        strategy: str = "llm",
        llm: Optional[LLM] = None,
        condense_prompt: Optional[BasePromptTemplate] = None,
        last_n_turns: int = 3,
        max_history_tokens: int = 1024,
        trigger: Optional[Trigger] = needs_rewrite,
        get_chat_history: Optional[HistoryFormatter] = None,
        count_tokens: Optional[TokenCounter] = None,
        cache_size: int = 1024,
        context_rules: ContextRules = DEFAULT_RULES,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ConfigurationError(f"rewrite strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
        if strategy == "llm" and llm is None:
            raise ConfigurationError("rewrite strategy 'llm' needs a condense llm; pass RewriteOptions(llm=...) or "
                                     "llm=")
        if last_n_turns < 0:
            raise ConfigurationError(f"last_n_turns must be >= 0, got {last_n_turns!r}")
        if max_history_tokens < 1:
            raise ConfigurationError(f"max_history_tokens must be >= 1, got {max_history_tokens!r}")
        if cache_size < 0:
            raise ConfigurationError(f"cache_size must be >= 0, got {cache_size!r}")
        if not isinstance(context_rules, ContextRules):
            raise ConfigurationError(f"context_rules must be a ContextRules, got {context_rules!r}")
        self.strategy = strategy
        self.llm = llm
        self._prompt = condense_prompt if condense_prompt is not None else DEFAULT_CONDENSE_PROMPT
        self.last_n_turns = last_n_turns
        self.max_history_tokens = max_history_tokens
        self.trigger = trigger
        self.get_chat_history: HistoryFormatter = (
            get_chat_history if get_chat_history is not None else messages_to_history_str
        )
        if count_tokens is None:
            from llama_index.core.utils import get_tokenizer

            tokenizer = get_tokenizer()
            count_tokens = lambda text: len(tokenizer(text))  # noqa: E731
        self.count_tokens = count_tokens
        self.cache_size = cache_size
        self.context_rules = context_rules  # the ``contextual`` strategy's rules
        self._cache: "OrderedDict[CacheKey, str]" = OrderedDict()
        self._cache_lock = threading.Lock()

    @property
    def history_window(self) -> Optional[int]:
        """User turns of history a rewrite reads (``None``: all; ``contextual`` weighs turns by recency itself and
        keeps the conversation's opening turn, see :data:`CONTEXTUAL_MAX_TURNS`)."""
        return None if self.strategy == "contextual" else self.last_n_turns

    # PromptMixin -------------------------------------------------------------------------------
    def _get_prompts(self) -> PromptDictType:
        return {"condense_prompt": self._prompt}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "condense_prompt" in prompts_dict:
            self._prompt = prompts_dict["condense_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    # public --------------------------------------------------------------------------------------
    def rewrite(self, question: str, history: Sequence[ChatMessage], *, history_ids: Optional[Sequence[str]] = None,
                message_id: Optional[str] = None) -> RewriteResult:
        start = time.perf_counter()
        plan = self._plan(question, history, history_ids, message_id)
        if plan.result is not None:
            return plan.result
        try:
            raw = self.llm.predict(self._prompt, chat_history=plan.history_str, question=question)  # type: ignore
        except Exception as e:  # noqa: BLE001 - any rewrite failure falls back to the user's words
            return self._fallback(question, start, f"rewrite failed: {type(e).__name__}: {e}", plan)
        return self._finish(question, raw, plan, start)

    async def arewrite(self, question: str, history: Sequence[ChatMessage], *,
                       history_ids: Optional[Sequence[str]] = None, message_id: Optional[str] = None) -> RewriteResult:
        start = time.perf_counter()
        plan = self._plan(question, history, history_ids, message_id)
        if plan.result is not None:
            return plan.result
        try:
            raw = await self.llm.apredict(self._prompt, chat_history=plan.history_str, question=question)  # type: ignore
        except Exception as e:  # noqa: BLE001
            return self._fallback(question, start, f"rewrite failed: {type(e).__name__}: {e}", plan)
        return self._finish(question, raw, plan, start)

    def clear_cache(self) -> None:
        with self._cache_lock:
            self._cache.clear()

    # shared pure-ish steps -------------------------------------------------------------------------
    def _window(self, history: Sequence[ChatMessage], user_only: bool) -> Tuple[List[ChatMessage], int]:
        picked = [history[i] for i in select_history(history, self.last_n_turns, user_only=user_only)]
        return fit_history(picked, self.max_history_tokens, self.count_tokens, self.get_chat_history)

    def _plan(self, question: str, history: Sequence[ChatMessage], history_ids: Optional[Sequence[str]],
              message_id: Optional[str]) -> _Plan:
        if len(history) == 0:
            return _Plan(RewriteResult(question, self.strategy, skipped_reason="no history"))
        if self.strategy == "none":
            return _Plan(RewriteResult(question, "none", skipped_reason="strategy none"))
        if self.strategy == "contextual":  # decides itself whether and how much the history matters
            return _Plan(self._contextual(question, history))
        if self.trigger is not None:
            decision = self.trigger(question)
            if not decision.rewrite:
                return _Plan(RewriteResult(question, self.strategy, skipped_reason=f"trigger: {decision.reason}"))
        window, shortened = self._window(history, user_only=self.strategy == "concat")
        if not window:
            return _Plan(RewriteResult(question, self.strategy,
                                       skipped_reason=f"no history within {self.max_history_tokens} tokens"))
        if self.strategy == "concat":
            query = "\n".join([*(m.content or "" for m in window), question])
            return _Plan(RewriteResult(query, "concat"))
        ids = tuple(history_ids) if history_ids is not None else tuple(_content_id(m) for m in history)
        mid = message_id if message_id is not None else _content_id(ChatMessage(role="user", content=question))
        key: CacheKey = (ids, mid, self._model_name())
        with self._cache_lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is not None:
            return _Plan(RewriteResult(cached, "llm", cache_hit=True))
        earlier = tuple(m.content or "" for m in window if m.role == MessageRole.USER)
        return _Plan(None, history_str=self.get_chat_history(window), key=key, shortened_answers=shortened,
                     earlier=earlier)

    def _contextual(self, question: str, history: Sequence[ChatMessage]) -> RewriteResult:
        start = time.perf_counter()
        turns = history_turns(history)  # recency weighting replaces the turn window
        if len(turns) > CONTEXTUAL_MAX_TURNS:
            turns = turns[:1] + turns[-(CONTEXTUAL_MAX_TURNS - 1):]
        plan = contextualize(question, turns, self.context_rules)
        skipped = None if plan.added else plan.reason
        return RewriteResult(plan.query, "contextual", latency_ms=(time.perf_counter() - start) * 1000,
                             skipped_reason=skipped, explanation=plan.explain(), plan=plan)

    def _model_name(self) -> str:
        return str(getattr(self.llm.metadata, "model_name", type(self.llm).__name__))  # type: ignore[union-attr]

    def _finish(self, question: str, raw: str, plan: _Plan, start: float) -> RewriteResult:
        parsed = parse_rewrite(raw, question, plan.earlier)
        if parsed.query is None:
            reason = "rewrite returned empty output" if parsed.rejected == "empty output" else \
                f"rewrite rejected: {parsed.rejected}"
            return self._fallback(question, start, reason, plan, parsed.steps)
        if plan.key is not None and self.cache_size > 0:
            with self._cache_lock:
                self._cache[plan.key] = parsed.query
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return RewriteResult(parsed.query, "llm", used_llm=True, latency_ms=(time.perf_counter() - start) * 1000,
                             cleaning=parsed.steps, shortened_answers=plan.shortened_answers)

    def _fallback(self, question: str, start: float, reason: str, plan: Optional[_Plan] = None,
                  cleaning: Tuple[str, ...] = ()) -> RewriteResult:
        return RewriteResult(question, "llm", used_llm=True, latency_ms=(time.perf_counter() - start) * 1000,
                             fallback_reason=reason, cleaning=cleaning,
                             shortened_answers=plan.shortened_answers if plan is not None else 0)
