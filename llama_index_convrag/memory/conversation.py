"""``ConversationMemory``: a deployment's memory parts behind the calls a turn (and a user) makes.

A turn makes three calls, the engine through its turn port (``chat/port.py``):

1. :meth:`ConversationMemory.load`, inside the port's load (the same store call): the conversation's summary, the
   owner's newest facts, a core ``Memory``'s blocks, and where the recent window starts (``before``: recall looks
   below it) -> :class:`LoadedMemory`;
2. :meth:`ConversationMemory.recall` (``arecall``) after the rewrite, with the turn's retrieval query, while the
   engine retrieves the evidence (:meth:`recall_query` embeds the query once for both; a sync turn recalls in one
   of :meth:`recall_threads`);
3. :meth:`ConversationMemory.schedule`, inside the port's commit, after the store's commit: queues
   :meth:`write_turn` on the :class:`~.writer.BackgroundWriter` (the conversation's lane) and returns at once; the
   job indexes the turn's messages for recall (a regenerated answer replaces the one it supersedes) and any earlier
   history message the recall rows lack (a write lost to a crash or dropped at shutdown), folds what left the window
   into the summary (every message it does not cover yet), gives it to a core ``Memory``'s blocks, and extracts the
   user's facts (when on; a turn whose writes were lost is not read for facts again).

Positions are a message's index in the stored conversation (:func:`~.units.units_of_conversation`): they never
shift. Every read and write names the owner; a write for a conversation its owner does not own (or no longer has) is
skipped. What a user (or an API) calls: :meth:`summary`, :meth:`summary_versions`, :meth:`edit_summary`,
:meth:`clear_summary`, :meth:`facts`, :meth:`delete_fact`, :meth:`forget_facts`, :meth:`recall_debug`,
:meth:`delete_conversation`, each with an async twin (in a worker thread).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms import LLM
from llama_index.core.memory import Memory
from llama_index.core.schema import QueryBundle
from pymilvus import MilvusClient

from llama_index_convrag._beside import LazyThreads
from llama_index_convrag.config.tokens import count_tokens as default_count_tokens
from llama_index_convrag.errors import ConfigurationError, RecordNotFoundError
from llama_index_convrag.memory.core_blocks import CoreBlocks
from llama_index_convrag.memory.episodic import EpisodicMemory, history_before
from llama_index_convrag.memory.facts import FactDecision, UserFacts
from llama_index_convrag.memory.options import MemoryOptions
from llama_index_convrag.memory.summary import FoldResult, RunningSummary
from llama_index_convrag.memory.units import Recall
from llama_index_convrag.memory.writer import BackgroundWriter
from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.storage.conversation.base import Message, in_history
from llama_index_convrag.storage.conversation.memory_rows import Fact, MemoryRowsMixin, SummaryVersion

logger = logging.getLogger(__name__)
#: Worker threads sync turns recall in while they retrieve (a turn uses one; more turns at once queue for them).
RECALL_THREADS = 8


@dataclass
class LoadedMemory:
    """What a turn's load read for its memory, and (after the rewrite) what it recalled.

    ``before``: recall looks at positions below it (the recent window, which the prompt holds, starts there; 0:
    nothing lies outside the window yet)."""

    owner: str
    conversation_id: str
    before: int
    summary: Optional[SummaryVersion] = None
    facts: List[Fact] = field(default_factory=list)
    core: List[Tuple[str, str]] = field(default_factory=list)
    recall: Optional[Recall] = None
    skipped: Dict[str, str] = field(default_factory=dict)

    def to_record(self) -> Dict[str, Any]:
        """The turn record's view: which summary version, which facts, which core blocks, what was recalled (each
        with its position, date, score and the searches that found it) and why a part was skipped."""
        s = self.summary
        return {"before": self.before,
                "summary": None if s is None else {"version": s.version, "covers_to": s.covers_to,
                                                   "covered": s.covered, "tokens": s.tokens, "source": s.source},
                "facts": [{"id": f.id, "text": f.text} for f in self.facts],
                "memory_blocks": [name for name, _ in self.core],
                "recall": None if self.recall is None else self.recall.to_record(),
                "skipped": dict(self.skipped)}


@dataclass
class TurnWrites:
    """What one turn's memory writes did (the writer's result of the job)."""

    conversation_id: str
    user_message_id: str
    indexed: int = 0
    deleted: int = 0
    caught_up: int = 0
    fold: Optional[Dict[str, Any]] = None
    blocks_fed: int = 0
    facts: List[Dict[str, Any]] = field(default_factory=list)
    llm_calls: int = 0
    skipped: Optional[str] = None
    errors: List[str] = field(default_factory=list)
    ms: Dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def window_start(messages: Sequence[Message], window: int) -> int:
    """The position where the last ``window`` history messages of a stored conversation start (recall looks
    below it); 0 when the history holds no more than ``window`` messages."""
    recent = history_before(messages, len(messages), window) if window else []
    if window and len(recent) < window:
        return 0
    return recent[0] if recent else len(messages)


def turn_positions(messages: Sequence[Message], user_message_id: str) -> List[int]:
    """The positions of a turn: its user message and every answer to it (superseded ones included)."""
    at = next((i for i, m in enumerate(messages) if m.id == user_message_id), None)
    if at is None:
        return []
    return [at] + [i for i in range(at + 1, len(messages)) if messages[i].reply_to == user_message_id]


def slid_out(messages: Sequence[Message], positions: Sequence[int], window: int) -> List[Message]:
    """The history messages that left the recent ``window`` because this turn's messages (``positions``) entered
    it; none for a regenerated answer (it takes its old answer's place)."""
    if not positions or any(messages[p].superseded_by is not None for p in positions[1:]):
        return []
    history = [m for m in messages if in_history(m)]
    first = messages[positions[0]]
    before = next((i for i, m in enumerate(history) if m.id == first.id), len(history))
    added = sum(1 for p in positions if in_history(messages[p]))
    return history[max(0, before - window):max(0, before + added - window)]


def writer_key(owner: str, conversation_id: str) -> str:
    """The writer key of a conversation: its writes run in order on one writer thread."""
    return f"{owner}\x00{conversation_id}"


class ConversationMemory:
    """The memory parts of a deployment (any may be None: off) and the writer of their turn writes."""

    def __init__(self, *, options: MemoryOptions, store: Any, episodic: Optional[EpisodicMemory] = None,
                 summary: Optional[RunningSummary] = None, facts: Optional[UserFacts] = None,
                 core: Optional[CoreBlocks] = None, writer: Optional[BackgroundWriter] = None) -> None:
        if not isinstance(options, MemoryOptions):
            raise ConfigurationError(f"options must be a MemoryOptions, got {type(options).__name__}")
        if not isinstance(store, MemoryRowsMixin) or not hasattr(store, "conversation_info"):
            raise ConfigurationError(f"memory needs a SQL conversation store (SQLiteConversationStore or "
                                     f"PostgresConversationStore: memory rows and owners), got {type(store).__name__}")
        self.options, self.store = options, store
        self.episodic, self.running_summary, self.user_facts, self.core = episodic, summary, facts, core
        self.writer = writer if writer is not None else BackgroundWriter(workers=options.writers)
        self._recall_threads = LazyThreads(RECALL_THREADS, "convrag-recall")

    @classmethod
    def from_defaults(cls, options: Optional[MemoryOptions] = None, *, store: Any,
                      embed_model: Optional[BaseEmbedding] = None, target: Optional[MilvusTarget] = None,
                      client: Optional[MilvusClient] = None, llm: Optional[LLM] = None,
                      core_memory: Optional[Memory] = None,
                      count_tokens: Optional[Callable[[str], int]] = None) -> "ConversationMemory":
        """Build the parts ``options`` turns on (default :class:`MemoryOptions`: recall and the summary): recall
        needs ``embed_model`` and Milvus (``client`` or ``target``); facts an LLM (``FactsOptions.llm`` or ``llm``)
        and ``embed_model``; the summary folds with ``SummaryOptions.llm`` or ``llm`` (none: its ``no_llm`` rule).
        ``core_memory``: a core ``Memory`` whose blocks join the turn (:class:`~.core_blocks.CoreBlocks`)."""
        o = options if options is not None else MemoryOptions()
        if not isinstance(o, MemoryOptions):
            raise ConfigurationError(f"options must be a MemoryOptions, got {type(o).__name__}")
        episodic = summary = facts = None
        if o.episodic.enabled:
            if embed_model is None or (client is None and target is None):
                raise ConfigurationError("recall of earlier turns (EpisodicOptions(enabled=True)) needs embed_model= "
                                         "and Milvus (client= or target=); turn it off with "
                                         "EpisodicOptions(enabled=False)")
            episodic = EpisodicMemory.from_defaults(embed_model=embed_model, target=target, client=client,
                                                    collection_name=o.episodic.collection_name,
                                                    rules=o.episodic.rules, cached_rows=o.episodic.cached_rows,
                                                    word_table=o.episodic.word_table)
        counter = count_tokens if count_tokens is not None else default_count_tokens
        if o.summary.enabled:
            summary = RunningSummary(store=store, options=o.summary, llm=llm, count_tokens=counter)
        if o.facts.enabled:
            if o.facts.llm is None and llm is None:
                raise ConfigurationError("user facts (FactsOptions(enabled=True)) need an LLM: give "
                                         "FactsOptions(llm=...) or the engine's llm")
            if embed_model is None:
                raise ConfigurationError("user facts need embed_model= (stored facts are compared by embedding)")
            facts = UserFacts(store=store, embed_model=embed_model, options=o.facts, llm=llm)
        core = CoreBlocks(core_memory) if core_memory is not None else None
        return cls(options=o, store=store, episodic=episodic, summary=summary, facts=facts, core=core)

    @property
    def parts(self) -> List[str]:
        """The parts that are on: ``recall``, ``summary``, ``facts``, ``memory_blocks``."""
        on = [("recall", self.episodic), ("summary", self.running_summary), ("facts", self.user_facts),
              ("memory_blocks", self.core)]
        return [name for name, part in on if part is not None]

    # -- a turn ---------------------------------------------------------------------------------------------------
    def load(self, owner: str, conversation_id: str, messages: Sequence[Message],
             history: Sequence[ChatMessage] = (), question: str = "") -> LoadedMemory:
        """What the turn reads (``messages``: the stored conversation before this turn; ``history``, ``question``:
        what a core ``Memory``'s blocks are read with)."""
        loaded = LoadedMemory(owner, conversation_id, window_start(messages, self.options.episodic.window))
        if self.running_summary is not None:
            loaded.summary = self.store.get_summary(owner, conversation_id)
        if self.user_facts is not None and self.options.facts.max_facts_in_prompt:
            loaded.facts = self.store.list_facts(owner, newest=self.options.facts.max_facts_in_prompt,
                                                 embeddings=False)
        if self.core is not None:
            loaded.core = self.core.read(history, question)
        return loaded

    def _recall_args(self, loaded: LoadedMemory) -> Optional[Dict[str, Any]]:
        if self.episodic is None:
            return None
        if loaded.before == 0:
            loaded.skipped["recall"] = "every earlier message is in the recent window"
            return None
        return {"owner": loaded.owner, "conversation_id": loaded.conversation_id, "before": loaded.before,
                "k": self.options.episodic.k}

    def recalls(self, loaded: LoadedMemory) -> bool:
        """Whether the turn's recall searches: recall is on and earlier messages lie outside the recent window."""
        return self.episodic is not None and loaded.before > 0

    def recall_query(self, text: str) -> QueryBundle:
        """The turn's retrieval query with its embedding from the recall's model (computed once before the turn's
        retrieval and recall start together; a model that caches queries serves the retrieval's own call)."""
        if self.episodic is None:
            raise ConfigurationError("recall_query needs recall on (EpisodicOptions(enabled=True))")
        return self.episodic.query_bundle(text)

    async def arecall_query(self, text: str) -> QueryBundle:
        """Async twin of :meth:`recall_query`."""
        if self.episodic is None:
            raise ConfigurationError("recall_query needs recall on (EpisodicOptions(enabled=True))")
        return await self.episodic.aquery_bundle(text)

    def recall_threads(self) -> Executor:
        """The worker threads a sync turn recalls in while it retrieves (made on first use; shared by the engine's
        twins)."""
        return self._recall_threads.get()

    def recall(self, loaded: LoadedMemory, query: Any) -> Optional[Recall]:
        """Recall earlier messages for the turn's retrieval ``query`` (set on ``loaded`` and returned)."""
        args = self._recall_args(loaded)
        if args is not None:
            loaded.recall = self.episodic.recall(query, **args)  # type: ignore[union-attr]
        return loaded.recall

    async def arecall(self, loaded: LoadedMemory, query: Any) -> Optional[Recall]:
        """Async twin of :meth:`recall` (Milvus' async client when the memory knows its target, else a thread)."""
        args = self._recall_args(loaded)
        if args is not None:
            episodic = self.episodic
            assert episodic is not None
            if episodic.target is not None:
                loaded.recall = await episodic.arecall(query, **args)
            else:
                loaded.recall = await asyncio.to_thread(episodic.recall, query, **args)
        return loaded.recall

    def schedule(self, owner: str, conversation_id: str, user_message_id: str) -> bool:
        """Queue the turn's writes (:meth:`write_turn`) after its commit; returns at once (False: refused, the
        writer is closed; recorded)."""
        def job() -> TurnWrites:
            writes = self.write_turn(owner, conversation_id, user_message_id)
            for error in writes.errors:
                self.writer.record_failure(f"turn {user_message_id}", error)
            return writes
        return self.writer.submit(f"turn {user_message_id}", job, key=writer_key(owner, conversation_id))

    def write_turn(self, owner: str, conversation_id: str, user_message_id: str) -> TurnWrites:
        """Every memory write of one committed turn (see the module docstring); a part that fails is logged and
        named in ``errors``, and the others still run."""
        w = TurnWrites(conversation_id, user_message_id)
        if self.store.conversation_info(conversation_id, owner=owner) is None:
            w.skipped = "the conversation is gone or not this owner's"
            return w
        messages = self.store.get_conversation(conversation_id)
        positions = turn_positions(messages, user_message_id)
        if not positions:
            w.skipped = "the user message is not in the conversation"
            return w
        for part, run in (("recall", self._index), ("summary", self._fold), ("memory_blocks", self._feed),
                          ("facts", self._remember)):
            started = time.perf_counter()
            try:
                run(w, owner, conversation_id, messages, positions)
            except Exception as exc:  # noqa: BLE001 - one part failing leaves the others to run
                logger.exception("memory write %s of turn %s failed", part, user_message_id)
                w.errors.append(f"{part}: {type(exc).__name__}: {exc}")
            w.ms[part] = round((time.perf_counter() - started) * 1000, 3)
        return w

    def _index(self, w: TurnWrites, owner: str, cid: str, messages: List[Message], positions: List[int]) -> None:
        if self.episodic is None:
            return
        missed = self.episodic.unindexed(owner, cid, messages, positions[0])
        w.indexed, w.deleted = self.episodic.index_positions(owner, cid, messages, missed + positions)
        w.caught_up = len(missed)
        if self.store.conversation_info(cid, owner=owner) is None:  # deleted while we wrote: leave nothing behind
            self.episodic.delete_conversation(owner, cid)
            w.skipped = "the conversation was deleted during the write"

    def _fold(self, w: TurnWrites, owner: str, cid: str, messages: List[Message], positions: List[int]) -> None:
        if self.running_summary is None or w.skipped:
            return
        try:
            result: FoldResult = self.running_summary.fold(owner, cid, [m for m in messages if in_history(m)])
        except RecordNotFoundError:  # the conversation went away before the summary was written
            w.skipped = "the conversation was deleted during the write"
            return
        w.fold = result.to_record()
        w.llm_calls += result.llm_calls

    def _feed(self, w: TurnWrites, owner: str, cid: str, messages: List[Message], positions: List[int]) -> None:
        if self.core is None or w.skipped:
            return
        out = slid_out(messages, positions, self.options.summary.window)
        if out:
            w.blocks_fed = self.core.put([m.to_chat_message() for m in out])

    def _remember(self, w: TurnWrites, owner: str, cid: str, messages: List[Message], positions: List[int]) -> None:
        user = messages[positions[0]]
        if self.user_facts is None or w.skipped or any(messages[p].superseded_by is not None for p in positions):
            return  # a regenerated answer: the user's message was read when it was first answered
        decisions, calls = self.user_facts.remember_counted(owner, user.content, message_id=user.id,
                                                            conversation_id=cid)
        w.facts = [d.to_dict() for d in decisions]
        w.llm_calls += calls

    def schedule_backfill(self, owner: str, conversation_id: str) -> bool:
        """Queue :meth:`backfill` (a conversation seeded, or resumed from before memory was on)."""
        return self.writer.submit(f"backfill {conversation_id}", lambda: self.backfill(owner, conversation_id),
                                  key=writer_key(owner, conversation_id))

    def backfill(self, owner: str, conversation_id: str) -> TurnWrites:
        """Index every history message of a conversation whose recall rows are fewer than its history (upserts:
        rows already there are rewritten), and fold what lies before the window into the summary."""
        w = TurnWrites(conversation_id, "")
        if self.store.conversation_info(conversation_id, owner=owner) is None:
            w.skipped = "the conversation is gone or not this owner's"
            return w
        messages = self.store.get_conversation(conversation_id)
        history = [i for i, m in enumerate(messages) if in_history(m)]
        if self.episodic is not None and self.episodic.count(owner, conversation_id) < len(history):
            w.indexed, _ = self.episodic.index_positions(owner, conversation_id, messages, history)
        self._fold(w, owner, conversation_id, messages, history)
        return w

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait for every queued write (True when done within ``timeout`` seconds)."""
        return self.writer.flush(timeout)

    def close(self, timeout: Optional[float] = None) -> bool:
        """Flush and refuse later writes; stop the recall's worker threads (a later recall makes them again)."""
        done = self.writer.close(timeout)
        self._recall_threads.close()
        if self.episodic is not None:
            self.episodic.close()
        return done

    # -- a user's view (what an API calls) --------------------------------------------------------------------------
    def _owned(self, owner: str, conversation_id: str) -> None:
        if self.store.conversation_info(conversation_id, owner=owner) is None:
            raise RecordNotFoundError(f"no conversation {conversation_id!r} of this owner")

    def summary(self, owner: str, conversation_id: str) -> Optional[SummaryVersion]:
        """The conversation's current summary (None: none yet, or not this owner's conversation)."""
        return self.store.get_summary(owner, conversation_id)

    def summary_versions(self, owner: str, conversation_id: str) -> List[SummaryVersion]:
        return self.store.list_summaries(owner, conversation_id)

    def edit_summary(self, owner: str, conversation_id: str, text: str) -> SummaryVersion:
        """A new version written by the user (refused over the cap; RecordNotFoundError for another's)."""
        summary = self.running_summary if self.running_summary is not None else RunningSummary(
            store=self.store, options=self.options.summary)
        return summary.edit(owner, conversation_id, text)

    def clear_summary(self, owner: str, conversation_id: str) -> int:
        """Delete every version; how many."""
        return self.store.clear_summary(owner, conversation_id)

    def facts(self, owner: str, *, include_history: bool = False) -> List[Fact]:
        return self.store.list_facts(owner, include_history=include_history, embeddings=False)

    def delete_fact(self, owner: str, fact_id: str) -> bool:
        """Delete one of ``owner``'s facts with its history (False: no such fact of theirs)."""
        return self.store.delete_fact(owner, fact_id)

    def forget_facts(self, owner: str) -> int:
        return self.store.delete_facts(owner)

    def recall_debug(self, owner: str, conversation_id: str, query: str, *, k: Optional[int] = None,
                     window: bool = True) -> Recall:
        """What recall returns for ``query`` in ``owner``'s conversation (below the recent window as a turn would,
        or over every message with ``window=False``); RecordNotFoundError for another's conversation."""
        self._owned(owner, conversation_id)
        if self.episodic is None:
            raise ConfigurationError("recall is off (EpisodicOptions(enabled=False)): nothing is indexed")
        before = window_start(self.store.get_conversation(conversation_id), self.options.episodic.window) \
            if window else None
        return self.episodic.recall(query, owner=owner, conversation_id=conversation_id, before=before,
                                    k=k if k is not None else self.options.episodic.k)

    def delete_conversation(self, owner: str, conversation_id: str) -> Dict[str, int]:
        """Delete the conversation's memory: its recall rows and its summaries (the store's
        ``delete_conversation`` deletes the summaries too; call this beside it). Facts are the user's and stay."""
        if self.episodic is not None:
            self.episodic.delete_conversation(owner, conversation_id)
        return {"summaries": self.store.clear_summary(owner, conversation_id)}

    # async twins (in a worker thread): what an async API awaits
    async def asummary(self, owner: str, conversation_id: str) -> Optional[SummaryVersion]:
        return await asyncio.to_thread(self.summary, owner, conversation_id)

    async def aedit_summary(self, owner: str, conversation_id: str, text: str) -> SummaryVersion:
        return await asyncio.to_thread(self.edit_summary, owner, conversation_id, text)

    async def aclear_summary(self, owner: str, conversation_id: str) -> int:
        return await asyncio.to_thread(self.clear_summary, owner, conversation_id)

    async def afacts(self, owner: str, *, include_history: bool = False) -> List[Fact]:
        return await asyncio.to_thread(self.facts, owner, include_history=include_history)

    async def adelete_fact(self, owner: str, fact_id: str) -> bool:
        return await asyncio.to_thread(self.delete_fact, owner, fact_id)

    async def arecall_debug(self, owner: str, conversation_id: str, query: str, *, k: Optional[int] = None,
                            window: bool = True) -> Recall:
        return await asyncio.to_thread(self.recall_debug, owner, conversation_id, query, k=k, window=window)

    async def adelete_conversation(self, owner: str, conversation_id: str) -> Dict[str, int]:
        return await asyncio.to_thread(self.delete_conversation, owner, conversation_id)


__all__ = ["ConversationMemory", "FactDecision", "LoadedMemory", "TurnWrites", "slid_out", "turn_positions",
           "window_start", "writer_key"]
