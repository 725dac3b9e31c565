"""``UserFacts``: durable facts a user states about themselves, extracted by an LLM and reconciled with the stored
ones, scoped to their owner.

For each user message, :meth:`UserFacts.remember` asks ``extract_prompt`` for the facts it states (one per line, or
``NONE``), then reconciles each new fact with the owner's active facts (:func:`reconcile_plan`, pure):

* the same text, or a stored fact at cosine ``>= duplicate_similarity`` (the local embedding model): a duplicate,
  stored nothing, no LLM call;
* no stored fact at ``>= min_similarity``: added, no LLM call;
* otherwise ``reconcile_prompt`` shows the ``similar`` closest stored facts and the LLM answers ``ADD``,
  ``UPDATE <id>`` (the new fact replaces that one, which stays as history), ``DELETE <id>`` (that fact is retracted,
  kept as history) or ``NONE``; a reply we cannot read, or one naming an id that was not shown, adds the fact
  (nothing the user said is lost; the duplicate check above keeps repeats out).

Each stored fact keeps the message it came from. Facts are read and deleted only with their owner's id
(:class:`~llama_index_convrag.storage.conversation.memory_rows.MemoryRowsMixin`). ``aremember`` is the async twin: one
generator of steps (LLM prompts and texts to embed) drives both; store calls are the store's (quick) sync calls.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Dict, Generator, List, Optional, Sequence, Tuple, Union

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.options import FactsOptions
from llama_index_convrag.prompts.memory import FACT_EXTRACT_PROMPT, FACT_RECONCILE_PROMPT
from llama_index_convrag.storage.conversation.memory_rows import Fact

ACTIONS = ("add", "update", "delete", "none", "duplicate")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_ACTION = re.compile(r"^\s*(ADD|UPDATE|DELETE|NONE|NOOP)\b\s*[:#\[(]?\s*([A-Za-z0-9_-]+)?", re.I)


@dataclass(frozen=True)
class LLMStep:
    prompt: str


@dataclass(frozen=True)
class EmbedStep:
    texts: Tuple[str, ...]


Step = Union[LLMStep, EmbedStep]
Steps = Generator[Step, Any, List["FactDecision"]]


@dataclass
class FactDecision:
    """What happened to one extracted fact: ``action`` (one of :data:`ACTIONS`), the stored fact it concerned
    (``target``), the new row (``stored``), and why."""

    fact: str
    action: str
    target: Optional[str] = None
    stored: Optional[str] = None
    similarity: Optional[float] = None
    reason: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def parse_facts(reply: str) -> List[str]:
    """The facts of an extraction reply: one per line, bullets stripped; ``NONE`` (or nothing) gives none."""
    out: List[str] = []
    for line in reply.splitlines():
        text = _BULLET.sub("", line).strip()
        if not text or text.upper().rstrip(".") in ("NONE", "NO FACTS"):
            continue
        if text not in out:
            out.append(text)
    return out


def parse_action(reply: str, shown: Sequence[str]) -> Tuple[str, Optional[str], str]:
    """``(action, target id, reason)`` of a reconcile reply; unreadable or naming an id not ``shown``: add."""
    first = next((line for line in reply.strip().splitlines() if line.strip()), "")
    m = _ACTION.match(first)
    if m is None:
        return "add", None, f"unreadable reply {first[:60]!r}: added"
    action = m.group(1).lower()
    action = "none" if action == "noop" else action
    if action in ("add", "none"):
        return action, None, "the LLM's choice"
    target = m.group(2)
    if target not in shown:
        return "add", None, f"{action.upper()} named {target!r}, not a fact shown: added"
    return action, target, "the LLM's choice"


def normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def similar_facts(vector: Sequence[float], stored: Sequence[Fact], limit: int) -> List[Tuple[Fact, float]]:
    """The ``limit`` stored facts closest to ``vector`` (cosine), best first; facts without a vector are skipped."""
    with_vectors = [f for f in stored if f.embedding]
    if not with_vectors:
        return []
    q = np.asarray(vector, dtype=np.float64)
    m = np.asarray([f.embedding for f in with_vectors], dtype=np.float64)
    sims = (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q) + 1e-12)
    order = np.argsort(-sims, kind="stable")[:limit]
    return [(with_vectors[i], float(sims[i])) for i in order]


class UserFacts(PromptMixin):
    """Extract, reconcile, list and delete a user's facts (``store``: a SQL conversation store)."""

    def __init__(self, *, store: Any, embed_model: BaseEmbedding, options: FactsOptions, llm: Optional[LLM] = None,
                 extract_prompt: BasePromptTemplate = FACT_EXTRACT_PROMPT,
                 reconcile_prompt: BasePromptTemplate = FACT_RECONCILE_PROMPT) -> None:
        if not isinstance(options, FactsOptions):
            raise ConfigurationError(f"options must be a FactsOptions, got {type(options).__name__}")
        self._store = store
        self._embed_model = embed_model
        self._options = options
        self._llm = options.llm if options.llm is not None else llm
        self._extract_prompt = extract_prompt
        self._reconcile_prompt = reconcile_prompt

    @property
    def options(self) -> FactsOptions:
        return self._options

    def _get_prompts(self) -> PromptDictType:
        return {"extract_prompt": self._extract_prompt, "reconcile_prompt": self._reconcile_prompt}

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "extract_prompt" in prompts:
            self._extract_prompt = prompts["extract_prompt"]
        if "reconcile_prompt" in prompts:
            self._reconcile_prompt = prompts["reconcile_prompt"]

    # -- the user's view --------------------------------------------------------------------------------------
    def facts(self, owner: str, *, include_history: bool = False) -> List[Fact]:
        return self._store.list_facts(owner, include_history=include_history)

    def delete(self, owner: str, fact_id: str) -> bool:
        return self._store.delete_fact(owner, fact_id)

    def forget_all(self, owner: str) -> int:
        return self._store.delete_facts(owner)

    def block_text(self, owner: str) -> str:
        """The facts block for the prompt: the newest ``max_facts_in_prompt`` active facts, one per line."""
        n = self._options.max_facts_in_prompt
        facts = self._store.list_facts(owner, newest=n, embeddings=False) if n else []
        return "\n".join(f"- {f.text}" for f in facts)

    # -- remembering ------------------------------------------------------------------------------------------
    def _steps(self, owner: str, text: str, message_id: Optional[str], conversation_id: Optional[str]) -> Steps:
        if not self._options.enabled or not text.strip():
            return []
        facts = parse_facts((yield LLMStep(self._extract_prompt.format(message=text))))
        if not facts:
            return []
        vectors = yield EmbedStep(tuple(facts))
        decisions = []
        for fact, vector in zip(facts, vectors):
            decision = yield from self._reconcile(owner, fact, vector, message_id, conversation_id)
            decisions.append(decision)
        return decisions

    def _reconcile(self, owner: str, fact: str, vector: Sequence[float], message_id: Optional[str],
                   conversation_id: Optional[str]) -> Generator[Step, Any, FactDecision]:
        o = self._options
        stored = self._store.list_facts(owner)
        same = next((f for f in stored if normalise(f.text) == normalise(fact)), None)
        if same is not None:
            return FactDecision(fact, "duplicate", target=same.id, similarity=1.0, reason="the same text is stored")
        close = [(f, s) for f, s in similar_facts(vector, stored, o.similar) if s >= o.min_similarity]
        if close and close[0][1] >= o.duplicate_similarity:
            return FactDecision(fact, "duplicate", target=close[0][0].id, similarity=round(close[0][1], 4),
                                reason=f"cosine >= {o.duplicate_similarity}")
        keep = dict(source_message_id=message_id, conversation_id=conversation_id, embedding=list(vector))
        if not close:
            row = self._store.add_fact(owner, fact, **keep)
            return FactDecision(fact, "add", stored=row.id, reason=f"no stored fact at cosine >= {o.min_similarity}")
        shown = "\n".join(f"[{f.id}] {f.text}" for f, _ in close)
        reply = yield LLMStep(self._reconcile_prompt.format(stored=shown, fact=fact))
        action, target, reason = parse_action(reply, [f.id for f, _ in close])
        sim = dict((f.id, round(s, 4)) for f, s in close).get(target) if target else round(close[0][1], 4)
        if action == "add":
            return FactDecision(fact, "add", stored=self._store.add_fact(owner, fact, **keep).id, similarity=sim,
                                reason=reason)
        if action == "update":
            row = self._store.add_fact(owner, fact, replaces=target, **keep)
            return FactDecision(fact, "update", target=target, stored=row.id, similarity=sim, reason=reason)
        if action == "delete":
            self._store.retract_fact(owner, target)
            return FactDecision(fact, "delete", target=target, similarity=sim, reason=reason)
        return FactDecision(fact, "none", similarity=sim, reason=reason)

    def remember(self, owner: str, text: str, *, message_id: Optional[str] = None,
                 conversation_id: Optional[str] = None) -> List[FactDecision]:
        """Extract the facts of one user message and reconcile each with ``owner``'s stored facts."""
        return self.remember_counted(owner, text, message_id=message_id, conversation_id=conversation_id)[0]

    def remember_counted(self, owner: str, text: str, *, message_id: Optional[str] = None,
                         conversation_id: Optional[str] = None) -> Tuple[List[FactDecision], int]:
        """:meth:`remember`, and the LLM calls it made."""
        steps = self._steps(owner, text, message_id, conversation_id)
        calls = 0
        try:
            step = next(steps)
            while True:
                calls += isinstance(step, LLMStep)
                step = steps.send(self._run(step))
        except StopIteration as done:
            return list(done.value or []), calls

    async def aremember(self, owner: str, text: str, *, message_id: Optional[str] = None,
                        conversation_id: Optional[str] = None) -> List[FactDecision]:
        """Async twin of :meth:`remember`."""
        steps = self._steps(owner, text, message_id, conversation_id)
        try:
            step = next(steps)
            while True:
                step = steps.send(await self._arun(step))
        except StopIteration as done:
            return list(done.value or [])

    def _need_llm(self) -> LLM:
        if self._llm is None:
            raise ConfigurationError("user facts need an LLM: give FactsOptions(llm=...) or the engine's llm")
        return self._llm

    def _run(self, step: Step) -> Any:
        if isinstance(step, LLMStep):
            return self._need_llm().complete(step.prompt).text
        return self._embed_model.get_text_embedding_batch(list(step.texts))

    async def _arun(self, step: Step) -> Any:
        if isinstance(step, LLMStep):
            return (await self._need_llm().acomplete(step.prompt)).text
        return await self._embed_model.aget_text_embedding_batch(list(step.texts))
