"""Retrieval-only question rewriting: strategies ``llm`` (condense prompt), ``contextual`` (no LLM: salient, recent
history terms, see :mod:`~llama_index_convrag.chat.contextualize`), ``concat`` (no LLM) and ``none``.

The rewrite conditions on the last ``last_n_turns`` user turns (a user message and the answers that followed it),
capped at ``max_history_tokens`` (oldest messages dropped first). An optional trigger skips the rewrite for
self-contained questions. A failing or empty LLM rewrite falls back to the original question and records why.
LLM rewrites are cached by (history message ids, message id, model).
"""

from __future__ import annotations

import hashlib
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

from llama_index_convrag.chat.budget import TokenCounter
from llama_index_convrag.chat.contextualize import Contextualized, contextualize, history_turns
from llama_index_convrag.chat.triggers import TriggerDecision, needs_rewrite
from llama_index_convrag.prompts.chat import DEFAULT_CONDENSE_PROMPT

STRATEGIES = ("llm", "contextual", "concat", "none")
HistoryFormatter = Callable[[Sequence[ChatMessage]], str]
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


@dataclass
class _Plan:
    result: Optional[RewriteResult]
    history_str: str = ""
    key: Optional[CacheKey] = None


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


def clean_rewrite(text: str) -> str:
    """Strip whitespace, surrounding quotes and a leading 'Standalone question:' label."""
    out = text.strip()
    for label in ("standalone question:", "question:"):
        if out.lower().startswith(label):
            out = out[len(label):].strip()
    if len(out) >= 2 and out[0] == out[-1] and out[0] in "\"'“”":
        out = out[1:-1].strip()
    return out


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
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"rewrite strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
        if strategy == "llm" and llm is None:
            raise ValueError("rewrite strategy 'llm' needs a condense llm; pass condense_llm= or llm=")
        if last_n_turns < 0:
            raise ValueError(f"last_n_turns must be >= 0, got {last_n_turns!r}")
        if max_history_tokens < 1:
            raise ValueError(f"max_history_tokens must be >= 1, got {max_history_tokens!r}")
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size!r}")
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
        self._cache: "OrderedDict[CacheKey, str]" = OrderedDict()
        self._cache_lock = threading.Lock()
        self._plans: "OrderedDict[str, Contextualized]" = OrderedDict()

    def contextual_plan(self, query: str) -> Optional[Contextualized]:
        """The ``contextual`` decision that produced ``query`` (recent ones only), for a fusing retriever."""
        with self._cache_lock:
            return self._plans.get(query)

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
            return self._fallback(question, start, f"rewrite failed: {type(e).__name__}: {e}")
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
            return self._fallback(question, start, f"rewrite failed: {type(e).__name__}: {e}")
        return self._finish(question, raw, plan, start)

    def clear_cache(self) -> None:
        with self._cache_lock:
            self._cache.clear()

    # shared pure-ish steps -------------------------------------------------------------------------
    def _window(self, history: Sequence[ChatMessage], user_only: bool) -> List[ChatMessage]:
        picked = [history[i] for i in select_history(history, self.last_n_turns, user_only=user_only)]
        while picked and self.count_tokens(self.get_chat_history(picked)) > self.max_history_tokens:
            picked.pop(0)
        return picked

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
        window = self._window(history, user_only=self.strategy == "concat")
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
        return _Plan(None, history_str=self.get_chat_history(window), key=key)

    def _contextual(self, question: str, history: Sequence[ChatMessage]) -> RewriteResult:
        start = time.perf_counter()
        plan = contextualize(question, history_turns(history))  # recency weighting replaces the turn window
        with self._cache_lock:
            self._plans[plan.query] = plan
            self._plans.move_to_end(plan.query)
            while len(self._plans) > max(self.cache_size, 16):
                self._plans.popitem(last=False)
        skipped = None if plan.added else plan.reason
        return RewriteResult(plan.query, "contextual", latency_ms=(time.perf_counter() - start) * 1000,
                             skipped_reason=skipped, explanation=plan.explain())

    def _model_name(self) -> str:
        return str(getattr(self.llm.metadata, "model_name", type(self.llm).__name__))  # type: ignore[union-attr]

    def _finish(self, question: str, raw: str, plan: _Plan, start: float) -> RewriteResult:
        query = clean_rewrite(raw)
        if not query:
            return self._fallback(question, start, "rewrite returned empty output")
        if plan.key is not None and self.cache_size > 0:
            with self._cache_lock:
                self._cache[plan.key] = query
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return RewriteResult(query, "llm", used_llm=True, latency_ms=(time.perf_counter() - start) * 1000)

    def _fallback(self, question: str, start: float, reason: str) -> RewriteResult:
        return RewriteResult(question, "llm", used_llm=True, latency_ms=(time.perf_counter() - start) * 1000,
                             fallback_reason=reason)
