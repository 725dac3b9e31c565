"""The chat engine's option objects and its written-down construction surface.

``ConvRAGChatEngine.from_defaults`` takes LlamaIndex core's names for the built parts (retriever or query engine,
LLM, synthesizer, postprocessors, chat mode, prompts, history) and three option objects, each validated once, here:

* :class:`RewriteOptions`: how a follow-up becomes its retrieval query (strategy, trigger, condense LLM, history
  window, the LLM-free rewrite's :class:`~llama_index_convrag.conversational.contextualize.ContextRules`);
* :class:`AnswerOptions`: how the answer is written and what the response carries (response mode, citations and
  their mode, context-mode prompts, the fallback, answer hooks and the judge);
* :class:`BudgetOptions`: the token budget (ratio, output reserve, a hard limit, the token counter).

:data:`FROM_DEFAULTS_NAMES` and :data:`AS_CHAT_ENGINE_NAMES` are the public surface, written here by hand (a test
pins the signatures to them), so a parameter added to ``__init__`` is never public by accident. A name that used to
be accepted is refused with a message naming its place now (:data:`MOVED`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import BasePromptTemplate

from llama_index_convrag.chat.budget import DEFAULT_BUDGET_RATIO, TokenCounter
from llama_index_convrag.chat.defaults import AUTO_REWRITE_STRATEGY, ENGINE_CITATION_MODE, REWRITE_STRATEGIES
from llama_index_convrag.chat.fallback import AnswerFallback
from llama_index_convrag.chat.hooks import AnswerHook
from llama_index_convrag.conversational.contextualize import DEFAULT_RULES, ContextRules
from llama_index_convrag.conversational.rewrite import HistoryFormatter, Trigger
from llama_index_convrag.conversational.triggers import needs_rewrite
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.judge.options import OLD_KEYWORDS, JudgeArg, judge_options
from llama_index_convrag.postprocessors.widen import DEFAULT_WIDEN, WidenRules, widen_rules
from llama_index_convrag.synthesizers.citations import check_citation_mode
from llama_index_convrag.synthesizers.grounding import SupportScorer
from llama_index_convrag.synthesizers.registry import lookup_mode

PromptLike = Union[str, BasePromptTemplate]


def _check_int(owner: str, name: str, value: Any, low: int, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigurationError(f"{owner}.{name} must be an int >= {low}{' or None' if optional else ''}, "
                                 f"got {value!r}")


def _check_bool(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{owner}.{name} must be a bool, got {value!r}")


def _check_callable(owner: str, name: str, value: Any) -> None:
    if value is not None and not callable(value):
        raise ArgumentTypeError(f"{owner}.{name} must be a callable or None, got {value!r}")


def _check_prompt(owner: str, name: str, value: Any, text: bool = True) -> None:
    kinds = (str, BasePromptTemplate) if text else (BasePromptTemplate,)
    if value is not None and not isinstance(value, kinds):
        accepted = "a str or a prompt template" if text else "a prompt template"
        raise ArgumentTypeError(f"{owner}.{name} must be {accepted} or None, got {value!r}")


@dataclass(frozen=True)
class RewriteOptions:
    """How a follow-up becomes its retrieval query (used for retrieval only; the user's message is stored as written).

    ``strategy``: one of :data:`~.defaults.REWRITE_STRATEGIES` (``auto``: ``llm`` when an LLM is resolved, else
    ``contextual``); ``llm``: the condense LLM (None: the engine's); ``trigger``: decides whether a question needs
    the LLM rewrite at all (None: always rewrite); ``last_n_turns`` / ``max_history_tokens``: the history window the
    condense prompt sees; ``get_chat_history``: how history is written as text (None: core's
    ``messages_to_history_str``); ``context_rules``: every rule of the LLM-free ``contextual`` rewrite; ``fusion``:
    with ``contextual``, search the follow-up as typed and as expanded and fuse the two lists (False: the expanded
    query alone)."""

    strategy: str = AUTO_REWRITE_STRATEGY
    llm: Optional[LLM] = None
    trigger: Optional[Trigger] = needs_rewrite
    last_n_turns: int = 3
    max_history_tokens: int = 1024
    get_chat_history: Optional[HistoryFormatter] = None
    context_rules: ContextRules = DEFAULT_RULES
    fusion: bool = True

    def __post_init__(self) -> None:
        if self.strategy not in REWRITE_STRATEGIES:
            raise ConfigurationError(f"RewriteOptions.strategy must be one of {list(REWRITE_STRATEGIES)}, "
                                     f"got {self.strategy!r}")
        if self.llm is not None and not isinstance(self.llm, LLM):
            raise ArgumentTypeError(f"RewriteOptions.llm must be a LlamaIndex LLM or None, got {self.llm!r}")
        _check_callable("RewriteOptions", "trigger", self.trigger)
        _check_int("RewriteOptions", "last_n_turns", self.last_n_turns, 0)
        _check_int("RewriteOptions", "max_history_tokens", self.max_history_tokens, 1)
        _check_callable("RewriteOptions", "get_chat_history", self.get_chat_history)
        if not isinstance(self.context_rules, ContextRules):
            raise ArgumentTypeError(f"RewriteOptions.context_rules must be a ContextRules, got {self.context_rules!r}")
        _check_bool("RewriteOptions", "fusion", self.fusion)


@dataclass(frozen=True)
class AnswerOptions:
    """How the answer is written and what the response carries.

    ``response_mode``: the synthesizers' mode (None: ``compact`` with an LLM, ``extractive`` without); ``citations``
    / ``citation_mode``: cite the answer (``aligned``, the engine's default: the LLM answers with the plain prompt and
    each sentence is cited with the passage that supports it; ``inline``: the LLM writes the markers, which is
    ``get_response_synthesizer``'s default); ``embed_model``: the sentence scorer of answers written without an LLM
    (``extractive``); ``context_prompt`` / ``context_refine_prompt``: the system context of the chat modes
    ``condense_plus_context`` and ``context``; ``prefix_messages``: messages between that system context and the
    conversation in those modes, in every turn (core's ``ContextChatEngine`` argument); ``rephrase_question``: answer the rewritten question (False: the
    user's words, the kept history written in with ``answer_query_prompt``); ``no_docs_reply``: a fixed reply when
    nothing is retrieved (None: answer anyway); ``fallback``: what is shown instead of an empty, marker-only or
    echoing answer (None: :class:`~.fallback.AnswerFallback` defaults); ``hooks``: :class:`~.hooks.AnswerHook` s run
    around each answer; ``judge``: judge-guided answers (``True``, a ``BaseJudge`` or a ``JudgeOptions``);
    ``return_generated_question`` / ``return_source_nodes``: what ``response.metadata`` and the response carry;
    ``widen``: what the answer reads around each hit of our Milvus retriever (a
    :class:`~llama_index_convrag.postprocessors.widen.WidenRules`: its neighbouring chunks, merged and deduplicated,
    cut back first when the budget is short; None: the matched chunks alone);
    ``support_scorer``: a model that judges which passage supports an answer sentence (``scorer(claim, passages) ->
    scores`` in 0..1, :data:`~llama_index_convrag.synthesizers.grounding.SupportScorer`) for the aligned citations,
    the turn record's ``grounding`` and the default fallback's retry (None: the lexical check)."""

    response_mode: Optional[str] = None
    citations: bool = True
    citation_mode: str = ENGINE_CITATION_MODE
    embed_model: Optional[BaseEmbedding] = None
    context_prompt: Optional[PromptLike] = None
    context_refine_prompt: Optional[PromptLike] = None
    prefix_messages: Tuple[ChatMessage, ...] = ()
    rephrase_question: bool = True
    answer_query_prompt: Optional[BasePromptTemplate] = None
    no_docs_reply: Optional[str] = None
    fallback: Optional[AnswerFallback] = None
    hooks: Tuple[AnswerHook, ...] = ()
    judge: JudgeArg = None
    return_generated_question: bool = False
    return_source_nodes: bool = True
    widen: Optional[WidenRules] = DEFAULT_WIDEN
    support_scorer: Optional[SupportScorer] = None

    def __post_init__(self) -> None:
        if self.response_mode is not None:
            lookup_mode(self.response_mode)  # names the registered modes
        _check_bool("AnswerOptions", "citations", self.citations)
        check_citation_mode(self.citation_mode)
        if self.embed_model is not None and not isinstance(self.embed_model, BaseEmbedding):
            raise ArgumentTypeError(f"AnswerOptions.embed_model must be a BaseEmbedding or None, "
                                    f"got {self.embed_model!r}")
        _check_prompt("AnswerOptions", "context_prompt", self.context_prompt)
        _check_prompt("AnswerOptions", "context_refine_prompt", self.context_refine_prompt)
        _check_prompt("AnswerOptions", "answer_query_prompt", self.answer_query_prompt, text=False)
        if isinstance(self.prefix_messages, (str, bytes)) or not isinstance(self.prefix_messages, Sequence) or any(
                not isinstance(m, ChatMessage) for m in self.prefix_messages):
            raise ArgumentTypeError(f"AnswerOptions.prefix_messages must be a sequence of ChatMessage, "
                                    f"got {self.prefix_messages!r}")
        object.__setattr__(self, "prefix_messages", tuple(self.prefix_messages))
        for name in ("rephrase_question", "return_generated_question", "return_source_nodes"):
            _check_bool("AnswerOptions", name, getattr(self, name))
        if self.no_docs_reply is not None and not isinstance(self.no_docs_reply, str):
            raise ArgumentTypeError(f"AnswerOptions.no_docs_reply must be a str or None, got {self.no_docs_reply!r}")
        if self.fallback is not None and not isinstance(self.fallback, AnswerFallback):
            raise ArgumentTypeError(f"AnswerOptions.fallback must be an AnswerFallback or None, got {self.fallback!r}")
        if isinstance(self.hooks, (str, bytes)) or not isinstance(self.hooks, Sequence):
            raise ArgumentTypeError(f"AnswerOptions.hooks must be a sequence of AnswerHook, got {self.hooks!r}")
        bad = [h for h in self.hooks if not isinstance(h, AnswerHook)]
        if bad:
            raise ArgumentTypeError(f"AnswerOptions.hooks must provide scope() and record_fields() (AnswerHook), "
                                    f"got {bad!r}")
        object.__setattr__(self, "hooks", tuple(self.hooks))
        judge_options(self.judge)  # names the accepted kinds
        widen_rules(self.widen, "AnswerOptions.widen")
        if self.support_scorer is not None and not callable(self.support_scorer):
            raise ArgumentTypeError(f"AnswerOptions.support_scorer must be a callable (claim, passages) -> scores or "
                                    f"None, got {self.support_scorer!r}")

    @property
    def fallback_or_default(self) -> AnswerFallback:
        """:attr:`fallback`, or the default :class:`~.fallback.AnswerFallback` (judging with :attr:`support_scorer`)."""
        if self.fallback is not None:
            return self.fallback
        return _DEFAULT_FALLBACK if self.support_scorer is None else AnswerFallback(scorer=self.support_scorer)


_DEFAULT_FALLBACK = AnswerFallback()


@dataclass(frozen=True)
class BudgetOptions:
    """The answer prompt's token budget (``chat/budget.py``: ``message_fit_in``).

    ``ratio`` of (the LLM's context window - ``reserved_output_tokens``) is spent on the prompt
    (``reserved_output_tokens`` None: the LLM's ``num_output``, else 256); ``max_tokens_limit``: a hard cap on the
    retrieved context's tokens (None: none); ``count_tokens``: the token counter of the budget and of the rewrite's
    history window (None: the served model's own counter when it has one, else tiktoken's)."""

    ratio: float = DEFAULT_BUDGET_RATIO
    reserved_output_tokens: Optional[int] = None
    max_tokens_limit: Optional[int] = None
    count_tokens: Optional[TokenCounter] = None

    def __post_init__(self) -> None:
        ratio = self.ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise ConfigurationError(f"BudgetOptions.ratio must be in (0, 1], got {ratio!r}")
        _check_int("BudgetOptions", "reserved_output_tokens", self.reserved_output_tokens, 0, optional=True)
        _check_int("BudgetOptions", "max_tokens_limit", self.max_tokens_limit, 0, optional=True)
        _check_callable("BudgetOptions", "count_tokens", self.count_tokens)


def options_of(kind: type, value: Any, name: str) -> Any:
    """``value`` when it is a ``kind`` (the option object), ``kind()`` for None; else an error naming both."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ArgumentTypeError(f"{name} must be a {kind.__name__} (or None), got {type(value).__name__}: {value!r}")
    return value


# --- the surface ---------------------------------------------------------------------------------------------------
FROM_DEFAULTS_NAMES: Tuple[str, ...] = (
    "retriever", "llm", "query_engine", "synthesizer", "node_postprocessors", "chat_mode", "system_prompt",
    "condense_question_prompt", "chat_history", "memory", "conversation_store", "conversation_id", "rewrite",
    "answer", "budget")
"""Every name ``ConvRAGChatEngine.from_defaults`` accepts (15), in signature order."""
AS_CHAT_ENGINE_NAMES: Tuple[str, ...] = (
    "chat_mode", "llm", "retriever_kwargs", "node_postprocessors", "system_prompt", "condense_question_prompt",
    "chat_history", "memory", "conversation_store", "conversation_id", "rewrite", "answer", "budget")
"""Every name ``ConvRAGIndex.as_chat_engine`` accepts (13): the engine's, less the parts the index builds
(``retriever``: from ``retriever_kwargs``, the arguments of ``as_retriever``; ``synthesizer``, ``query_engine``)."""

_REWRITE = "rewrite=RewriteOptions({})"
_ANSWER = "answer=AnswerOptions({})"
_BUDGET = "budget=BudgetOptions({})"
_SYNTH = "synthesizer=get_response_synthesizer({}=...) (the synthesizer's own settings)"
MOVED: Dict[str, str] = {
    "condense_prompt": "condense_question_prompt=",
    "rewrite_strategy": _REWRITE.format("strategy=...)"),
    "skip_condense": _REWRITE.format("strategy='none'"),
    "rewrite_trigger": _REWRITE.format("trigger=None to always rewrite"),
    "condense_llm": _REWRITE.format("llm=..."),
    "last_n_turns": _REWRITE.format("last_n_turns=..."),
    "max_rewrite_history_tokens": _REWRITE.format("max_history_tokens=..."),
    "get_chat_history": _REWRITE.format("get_chat_history=..."),
    "contextual_fusion": _REWRITE.format("fusion=..."),
    "context_rules": _REWRITE.format("context_rules=ContextRules(...)"),
    "response_mode": _ANSWER.format("response_mode=..."),
    "citations": _ANSWER.format("citations=..."),
    "citation_mode": _ANSWER.format("citation_mode=..."),
    "embed_model": _ANSWER.format("embed_model=..."),
    "context_prompt": _ANSWER.format("context_prompt=..."),
    "context_template": _ANSWER.format("context_prompt=..."),
    "context_refine_prompt": _ANSWER.format("context_refine_prompt=..."),
    "context_refine_template": _ANSWER.format("context_refine_prompt=..."),
    "rephrase_question": _ANSWER.format("rephrase_question=..."),
    "answer_query_prompt": _ANSWER.format("answer_query_prompt=..."),
    "response_if_no_docs_found": _ANSWER.format("no_docs_reply=..."),
    "answer_fallback": _ANSWER.format("fallback=AnswerFallback(...)"),
    "answer_hooks": _ANSWER.format("hooks=[...]"),
    "judge": _ANSWER.format("judge=..."),
    "widen": _ANSWER.format("widen=WidenRules(...), or None for the matched chunks alone"),
    "return_generated_question": _ANSWER.format("return_generated_question=..."),
    "return_source_nodes": _ANSWER.format("return_source_nodes=..."),
    "return_source_documents": _ANSWER.format("return_source_nodes=..."),
    "budget_ratio": _BUDGET.format("ratio=..."),
    "reserved_output_tokens": _BUDGET.format("reserved_output_tokens=..."),
    "max_tokens_limit": _BUDGET.format("max_tokens_limit=..."),
    "count_tokens": _BUDGET.format("count_tokens=..."),
    "streaming": "nothing: stream_chat() / astream_chat() stream (every engine can)",
    "streaming_synthesizer": "synthesizer= (its streaming twin is made from it), or ConvRAGChatEngine(...) with "
                             "built parts",
    "verbose": "logging: the engine logs each turn at DEBUG/WARNING on 'llama_index_convrag.chat' and emits "
               "instrumentation events (llama_index_convrag.chat.events); every turn's TurnRecord says what it did",
    "callback_manager": "Settings.callback_manager, or synthesizer=get_response_synthesizer(callback_manager=...)",
    "prefix_messages": _ANSWER.format("prefix_messages=[...]") + " (context modes), or chat_history= (the messages "
                       "that start the conversation)",
    "memory_cls": "memory= (a built memory)",
    **{k: _SYNTH.format(k) for k in (
        "text_qa_template", "refine_template", "summary_template", "simple_template", "chat_content_qa_template",
        "chat_content_refine_template", "chat_summary_template", "prompt_helper", "chat_prompt_helper", "use_async",
        "structured_answer_filtering", "output_cls", "program_factory", "multimodal", "empty_response",
        "early_stop", "tokenizer")},
    **{k: "answer=AnswerOptions(judge=JudgeOptions(...))" for k in OLD_KEYWORDS},
}
"""Names no longer accepted -> where that setting lives now."""


def refuse_names(given: Mapping[str, Any], where: str, accepted: Sequence[str],
                 extra: Optional[Mapping[str, str]] = None) -> None:
    """Raise naming each of ``given`` (names ``where`` does not take) and its place now (``extra`` first, then
    :data:`MOVED`), else the accepted names; nothing when ``given`` is empty."""
    if not given:
        return
    moved = {**MOVED, **(extra or {})}
    lines = [f"{name}: now {moved[name]}" if name in moved else f"{name}: unknown" for name in sorted(given)]
    raise ArgumentTypeError(f"{where} does not take {sorted(given)} ({'; '.join(lines)}); accepted: {list(accepted)}")


__all__ = ["AS_CHAT_ENGINE_NAMES", "AnswerOptions", "BudgetOptions", "FROM_DEFAULTS_NAMES", "MOVED",
           "RewriteOptions", "options_of", "refuse_names"]
