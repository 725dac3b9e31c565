"""``RunningSummary``: messages that leave the recent window are folded into a bounded, versioned summary.

:meth:`RunningSummary.fold` takes a conversation's messages and the window size, finds the messages older than the
window that the stored summary does not cover yet (:func:`pending`), and writes the next version: with an LLM, the
old summary and those messages folded by ``fold_prompt``; a reply over ``max_tokens`` is asked once to shorten
(``shorten_prompt``) and then cut at the cap, so the stored text never exceeds it; without an LLM, the ``salient``
summary (names and numbers) or nothing (``no_llm='none'``). Each version says which messages it covers.
:meth:`view`, :meth:`edit` (a new version, capped the same way) and :meth:`clear` serve the user. ``afold`` is the
async twin; both run one generator of steps (LLM calls) with the store calls around it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generator, List, Optional, Sequence

from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType

from llama_index_convrag.config.tokens import count_tokens as default_count_tokens
from llama_index_convrag.config.tokens import cut_to_tokens
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.options import SummaryOptions
from llama_index_convrag.memory.salient import salient_summary
from llama_index_convrag.prompts.memory import SUMMARY_FOLD_PROMPT, SUMMARY_SHORTEN_PROMPT
from llama_index_convrag.storage.conversation.base import Message
from llama_index_convrag.storage.conversation.memory_rows import SummaryVersion

#: Words per token the prompts ask for (English runs about 0.75 words a token in cl100k).
WORDS_PER_TOKEN = 0.75
#: Yields a prompt, receives the LLM's reply text, returns the final summary text.
Steps = Generator[str, str, str]


def pending(messages: Sequence[Message], window: int, covers_to: Optional[str]) -> List[Message]:
    """The messages before the last ``window`` that come after ``covers_to`` (all of them when it is None or no
    longer in the conversation)."""
    older = list(messages[: max(0, len(messages) - window)])
    ids = [m.id for m in older]
    if covers_to is not None and covers_to in ids:
        return older[ids.index(covers_to) + 1:]
    if covers_to is not None and covers_to in [m.id for m in messages]:
        return []  # it covers the window's messages already (an edit after them)
    return older


def format_messages(messages: Sequence[Message]) -> str:
    return "\n".join(f"{m.role}: {m.content}" for m in messages)


@dataclass
class FoldResult:
    """What one fold did: the new version (None: nothing to fold or no summary without an LLM), the LLM calls it
    made, and whether the reply had to be shortened or cut."""

    version: Optional[SummaryVersion]
    llm_calls: int = 0
    shortened: bool = False
    cut: bool = False

    def to_record(self) -> Dict[str, Any]:
        return {"version": None if self.version is None else self.version.version, "llm_calls": self.llm_calls,
                "shortened": self.shortened, "cut": self.cut}


class RunningSummary(PromptMixin):
    """A conversation's summary in the conversation store (``put_summary`` / ``get_summary`` / ``clear_summary``)."""

    def __init__(self, *, store: Any, options: SummaryOptions, llm: Optional[LLM] = None,
                 fold_prompt: BasePromptTemplate = SUMMARY_FOLD_PROMPT,
                 shorten_prompt: BasePromptTemplate = SUMMARY_SHORTEN_PROMPT,
                 count_tokens: Callable[[str], int] = default_count_tokens) -> None:
        if not isinstance(options, SummaryOptions):
            raise ConfigurationError(f"options must be a SummaryOptions, got {type(options).__name__}")
        self._store = store
        self._options = options
        self._llm = options.llm if options.llm is not None else llm
        self._fold_prompt = fold_prompt
        self._shorten_prompt = shorten_prompt
        self._count = count_tokens

    @property
    def options(self) -> SummaryOptions:
        return self._options

    def _get_prompts(self) -> PromptDictType:
        return {"fold_prompt": self._fold_prompt, "shorten_prompt": self._shorten_prompt}

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "fold_prompt" in prompts:
            self._fold_prompt = prompts["fold_prompt"]
        if "shorten_prompt" in prompts:
            self._shorten_prompt = prompts["shorten_prompt"]

    # -- the user's view --------------------------------------------------------------------------------------
    def view(self, owner: str, conversation_id: str) -> Optional[SummaryVersion]:
        return self._store.get_summary(owner, conversation_id)

    def edit(self, owner: str, conversation_id: str, text: str) -> SummaryVersion:
        """A new version written by the user; over the cap it is refused (nothing is cut from what a user wrote)."""
        tokens = self._count(text)
        if tokens > self._options.max_tokens:
            raise ConfigurationError(f"the summary has {tokens} tokens, over the cap of {self._options.max_tokens}; "
                                     "shorten it or raise SummaryOptions.max_tokens")
        old = self._store.get_summary(owner, conversation_id)
        return self._store.put_summary(owner, conversation_id, text, covers_to=None if old is None else old.covers_to,
                                       covered=0 if old is None else old.covered, tokens=tokens, source="edit")

    def clear(self, owner: str, conversation_id: str) -> int:
        return self._store.clear_summary(owner, conversation_id)

    # -- folding ----------------------------------------------------------------------------------------------
    def _max_words(self) -> int:
        return max(8, int(self._options.max_tokens * WORDS_PER_TOKEN))

    def _steps(self, old: str, messages: Sequence[Message], result: FoldResult) -> Steps:
        """The LLM calls of one fold: fold, and once more to shorten when over the cap; then cut at the cap."""
        cap = self._options.max_tokens
        text = (yield self._fold_prompt.format(summary=old or "(none yet)", messages=format_messages(messages),
                                               max_words=self._max_words())).strip()
        if self._count(text) > cap:
            result.shortened = True
            text = (yield self._shorten_prompt.format(summary=text, max_words=self._max_words())).strip()
        if self._count(text) > cap:
            result.cut = True
            text, _ = cut_to_tokens(text, cap)
            while text and self._count(text) > cap:  # a cut can re-tokenise longer at the seam
                text = text[:-1]
        return text

    def _plan(self, owner: str, conversation_id: str, messages: Sequence[Message]
              ) -> Optional[tuple]:
        if not self._options.enabled:
            return None
        old = self._store.get_summary(owner, conversation_id)
        todo = pending(messages, self._options.window, None if old is None else old.covers_to)
        if not todo:
            return None
        return old, todo

    def _batch(self, todo: Sequence[Message]) -> List[Message]:
        """The first messages of ``todo`` within ``fold_tokens`` (at least one)."""
        out: List[Message] = []
        total = 0
        for m in todo:
            total += self._count(f"{m.role}: {m.content}")
            if out and total > self._options.fold_tokens:
                break
            out.append(m)
        return out

    def _write(self, owner: str, conversation_id: str, old: Optional[SummaryVersion], todo: Sequence[Message],
               text: str, source: str) -> SummaryVersion:
        covered = (0 if old is None else old.covered) + len(todo)
        return self._store.put_summary(owner, conversation_id, text, covers_to=todo[-1].id, covered=covered,
                                       tokens=self._count(text), source=source)

    def _without_llm(self, owner: str, conversation_id: str, messages: Sequence[Message],
                     old: Optional[SummaryVersion], todo: Sequence[Message]) -> FoldResult:
        if self._options.no_llm == "none":
            return FoldResult(None)
        upto = [m.content for m in messages[: messages.index(todo[-1]) + 1]]
        text = salient_summary(upto, self._options.max_tokens, self._count)
        return FoldResult(self._write(owner, conversation_id, old, todo, text, "salient"))

    def fold(self, owner: str, conversation_id: str, messages: Sequence[Message]) -> FoldResult:
        """Fold the messages that left the window (``messages``: the whole conversation, oldest first), at most
        ``fold_tokens`` of them per LLM request (a version each)."""
        result = FoldResult(None)
        while True:
            plan = self._plan(owner, conversation_id, messages)
            if plan is None:
                return result
            old, todo = plan
            if self._llm is None:
                return self._without_llm(owner, conversation_id, messages, old, todo)
            todo = self._batch(todo)
            steps = self._steps("" if old is None else old.text, todo, result)
            try:
                prompt = next(steps)
                while True:
                    result.llm_calls += 1
                    prompt = steps.send(self._llm.complete(prompt).text)
            except StopIteration as done:
                text = done.value
            result.version = self._write(owner, conversation_id, old, todo, text, "llm")

    async def afold(self, owner: str, conversation_id: str, messages: Sequence[Message]) -> FoldResult:
        """Async twin of :meth:`fold` (the store calls run in a thread)."""
        result = FoldResult(None)
        while True:
            plan = await asyncio.to_thread(self._plan, owner, conversation_id, messages)
            if plan is None:
                return result
            old, todo = plan
            if self._llm is None:
                return await asyncio.to_thread(self._without_llm, owner, conversation_id, messages, old, todo)
            todo = self._batch(todo)
            steps = self._steps("" if old is None else old.text, todo, result)
            try:
                prompt = next(steps)
                while True:
                    result.llm_calls += 1
                    prompt = steps.send((await self._llm.acomplete(prompt)).text)
            except StopIteration as done:
                text = done.value
            result.version = await asyncio.to_thread(self._write, owner, conversation_id, old, todo, text, "llm")
