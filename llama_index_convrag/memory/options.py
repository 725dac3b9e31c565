"""``MemoryOptions``: every memory setting of a deployment in one value (episodic recall, the running summary, user
facts), each part turned on and off on its own. Checked once, at construction; errors name the bad value and the
accepted ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from llama_index.core.llms import LLM

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.memory.episodic_rows import DEFAULT_CACHED_ROWS
from llama_index_convrag.memory.episodic_schema import DEFAULT_COLLECTION
from llama_index_convrag.memory.rules import RecallRules
from llama_index_convrag.milvus.client import validate_collection_name

NO_LLM_SUMMARY = ("none", "salient")
"""What the summary is without an LLM: ``none`` (no summary block; the default) or ``salient`` (names and numbers,
:mod:`~llama_index_convrag.memory.salient`)."""


WRITERS = 4
"""Default writer threads. ``bench/memory_writers.py`` (48 turns' writes of 16 conversations, a 200 ms memory LLM):
4 drained them in 0.67x the time of 1 writer (per round 0.52-0.76x), 8 in 0.53x (0.51-0.56x); 4 holds fewer threads
that compete with the turns for CPU."""


def _int(owner: str, name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigurationError(f"{owner}.{name} must be an int >= {low}, got {value!r}")


def _flag(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{owner}.{name} must be True or False, got {value!r}")


def _llm(owner: str, value: Any) -> None:
    if value is not None and not isinstance(value, LLM):
        raise ConfigurationError(f"{owner}.llm must be a LlamaIndex LLM or None, got {type(value).__name__}")


@dataclass(frozen=True)
class EpisodicOptions:
    """Recall of earlier messages: ``k`` messages from outside the recent ``window`` (the last ``window`` messages,
    which the prompt holds already), ranked by ``rules``, from the Milvus collection ``collection_name`` (one for
    every conversation and owner; each row names both). ``cached_rows``: the recalled messages' fields kept in
    this process, so that a recall reads only the candidates' ids and scores from Milvus
    (:mod:`~llama_index_convrag.memory.episodic_rows`; 0 reads their fields at every recall: use 0 when other
    processes write the same collection on a Milvus server, whose rewrites this process would not see).
    ``word_table``: the vocabulary bridge reads the local model's single-word vectors from a table of its vocabulary
    (:mod:`~llama_index_convrag.embeddings.word_table`: made once per machine, in the background, on first use)
    instead of embedding each new word; False embeds them."""

    enabled: bool = True
    k: int = 10
    window: int = 6
    rules: RecallRules = field(default_factory=RecallRules)
    collection_name: str = DEFAULT_COLLECTION
    cached_rows: int = DEFAULT_CACHED_ROWS
    word_table: bool = True

    def __post_init__(self) -> None:
        _flag("EpisodicOptions", "enabled", self.enabled)
        _flag("EpisodicOptions", "word_table", self.word_table)
        _int("EpisodicOptions", "k", self.k, 1)
        _int("EpisodicOptions", "window", self.window, 0)
        _int("EpisodicOptions", "cached_rows", self.cached_rows, 0)
        validate_collection_name(self.collection_name)
        if not isinstance(self.rules, RecallRules):
            raise ConfigurationError(f"EpisodicOptions.rules must be a RecallRules, got {type(self.rules).__name__}")


@dataclass(frozen=True)
class SummaryOptions:
    """The running summary: messages that leave the recent ``window`` are folded in by ``llm`` (``None``: the
    engine's LLM) under ``max_tokens``, never more; without any LLM, ``no_llm`` says what happens. One fold request
    carries at most ``fold_tokens`` of messages (a longer backlog, such as a resumed conversation that had no
    summary, folds in several requests)."""

    enabled: bool = True
    max_tokens: int = 400
    window: int = 6
    llm: Optional[LLM] = None
    no_llm: str = "none"
    fold_tokens: int = 2000

    def __post_init__(self) -> None:
        _flag("SummaryOptions", "enabled", self.enabled)
        _int("SummaryOptions", "max_tokens", self.max_tokens, 16)
        _int("SummaryOptions", "window", self.window, 0)
        _int("SummaryOptions", "fold_tokens", self.fold_tokens, 1)
        _llm("SummaryOptions", self.llm)
        if self.no_llm not in NO_LLM_SUMMARY:
            raise ConfigurationError(f"SummaryOptions.no_llm must be one of {list(NO_LLM_SUMMARY)}, "
                                     f"got {self.no_llm!r}")


@dataclass(frozen=True)
class FactsOptions:
    """User facts, off unless a deployment opts in: ``llm`` (``None``: the engine's LLM) extracts them from the
    user's messages; ``similar`` stored facts at cosine ``>= min_similarity`` are compared with each new one;
    ``duplicate_similarity`` and above counts as the same fact without asking the LLM."""

    enabled: bool = False
    llm: Optional[LLM] = None
    similar: int = 5
    min_similarity: float = 0.5
    duplicate_similarity: float = 0.92
    max_facts_in_prompt: int = 20

    def __post_init__(self) -> None:
        _flag("FactsOptions", "enabled", self.enabled)
        _llm("FactsOptions", self.llm)
        _int("FactsOptions", "similar", self.similar, 1)
        _int("FactsOptions", "max_facts_in_prompt", self.max_facts_in_prompt, 0)
        for name in ("min_similarity", "duplicate_similarity"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= value <= 1.0:
                raise ConfigurationError(f"FactsOptions.{name} must be a number in [-1, 1], got {value!r}")
        if self.duplicate_similarity < self.min_similarity:
            raise ConfigurationError(f"FactsOptions.duplicate_similarity ({self.duplicate_similarity}) must be >= "
                                     f"min_similarity ({self.min_similarity})")


@dataclass(frozen=True)
class MemoryOptions:
    """Every memory setting: ``episodic``, ``summary`` and ``facts``; ``MemoryOptions()`` turns recall and the summary
    on and leaves facts off. ``writers``: the threads that run the writes after each turn (one conversation's writes
    always run on one of them, in order; :class:`~llama_index_convrag.memory.writer.BackgroundWriter`)."""

    episodic: EpisodicOptions = field(default_factory=EpisodicOptions)
    summary: SummaryOptions = field(default_factory=SummaryOptions)
    facts: FactsOptions = field(default_factory=FactsOptions)
    writers: int = WRITERS

    def __post_init__(self) -> None:
        _int("MemoryOptions", "writers", self.writers, 1)
        for name, kind in (("episodic", EpisodicOptions), ("summary", SummaryOptions), ("facts", FactsOptions)):
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise ConfigurationError(f"MemoryOptions.{name} must be a {kind.__name__}, got {type(value).__name__}")

    @classmethod
    def off(cls) -> "MemoryOptions":
        """Every part off (the engine as it was: the window alone)."""
        return cls(episodic=EpisodicOptions(enabled=False), summary=SummaryOptions(enabled=False),
                   facts=FactsOptions(enabled=False))
