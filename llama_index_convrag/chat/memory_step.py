"""The chat engine's memory: what ``memory=`` accepts, and a turn's memory blocks under the one budget.

``memory=`` (:func:`memory_arg`, decided per class):

* :class:`~llama_index_convrag.memory.options.MemoryOptions`: our memory, built from the engine's parts
  (:func:`build_memory`: Milvus and the embedding model of a ``MilvusHybridRetriever``, the port's store, the LLM);
* a built :class:`~llama_index_convrag.memory.conversation.ConversationMemory`: as it is (its store must be the
  port's);
* core's ``Memory``: its messages seed the conversation and its memory blocks join every turn's budget as the
  ``memory_blocks`` block (:class:`~llama_index_convrag.memory.core_blocks.CoreBlocks`); our own parts stay off;
* core's ``ChatMemoryBuffer``: its messages seed the conversation (its token limit is the engine's budget's job);
* core's ``ChatSummaryMemoryBuffer`` and any other ``BaseMemory``: refused, naming what to use instead (they keep a
  summary or other memories the engine would drop).

A turn with memory (:func:`fit_with_memory`) fits every block under one budget with
:func:`~.blocks.fit_blocks`: the fixed prompt (with the memory headings), the question, the evidence, the summary,
user facts, the recalled messages, a core ``Memory``'s blocks and the recent history, cut lowest priority first;
:func:`render_memory` writes the kept memory items as one text that goes where the chat mode puts context: the
system message of ``condense_plus_context`` / ``context`` (after the documents), the synthesizer's query of
``condense_question`` (:data:`~llama_index_convrag.prompts.memory.MEMORY_QUERY_PROMPT`; the passages stay the
context, so citations point at passages only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.llm import LLM
from llama_index.core.memory import ChatMemoryBuffer, ChatSummaryMemoryBuffer, Memory
from llama_index.core.memory.types import BaseMemory

from llama_index_convrag.chat.blocks import BlockReport, assemble, fit_blocks
from llama_index_convrag.chat.budget import TokenCounter
from llama_index_convrag.conversational.retriever import ConversationalRetriever
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.memory.conversation import ConversationMemory, LoadedMemory
from llama_index_convrag.memory.options import MemoryOptions
from llama_index_convrag.prompts.memory import MEMORY_HEADINGS, MEMORY_QUERY_PROMPT, MEMORY_SECTION_PROMPT
from llama_index_convrag.retrievers.milvus_hybrid import MilvusHybridRetriever

MEMORY_KINDS = ("MemoryOptions", "ConversationMemory", "llama_index.core.memory.Memory", "ChatMemoryBuffer")
"""What ``memory=`` accepts (besides None)."""
MEMORY_BLOCKS = ("memory_blocks", "facts", "summary", "recalled")
"""The memory blocks of a turn's budget, in prompt order."""
PLACEMENTS = {"system": "the system message, after the retrieved documents (condense_plus_context, context)",
              "query": "the synthesizer's query, before the question (condense_question)"}


@dataclass
class MemoryArg:
    """``memory=`` sorted out: the messages that seed the conversation, and our memory to build or use."""

    seed: List[ChatMessage]
    options: Optional[MemoryOptions] = None
    built: Optional[ConversationMemory] = None
    core: Optional[Memory] = None


def memory_arg(memory: Any, chat_history: Optional[List[ChatMessage]]) -> MemoryArg:
    """What ``memory=`` (with ``chat_history=``) means, per class (see the module docstring)."""
    history = list(chat_history) if chat_history is not None else []
    if memory is None:
        return MemoryArg(history)
    if isinstance(memory, MemoryOptions):
        return MemoryArg(history, options=memory)
    if isinstance(memory, ConversationMemory):
        return MemoryArg(history, built=memory)
    if not isinstance(memory, BaseMemory):
        raise ArgumentTypeError(f"memory must be one of {list(MEMORY_KINDS)} or None, got "
                                f"{type(memory).__name__}: {memory!r}")
    if chat_history is not None:
        raise ArgumentTypeError("pass chat_history= or a core memory= (both seed the conversation), not both")
    if isinstance(memory, Memory):
        return MemoryArg(list(memory.get_all()), options=MemoryOptions.off(), core=memory)
    if isinstance(memory, ChatMemoryBuffer):
        return MemoryArg(list(memory.get_all()))
    if isinstance(memory, ChatSummaryMemoryBuffer):
        raise ConfigurationError(
            "ChatSummaryMemoryBuffer summarises the history when it is read, which this engine never does (the "
            "summary would be lost); use memory=MemoryOptions() (a bounded, versioned running summary folded by the "
            "LLM after each turn: SummaryOptions(llm=..., max_tokens=...)), and chat_history=buffer.get_all() to "
            "seed the conversation")
    raise ConfigurationError(
        f"memory={type(memory).__name__} is not one the engine can honour (its memories would be dropped); accepted: "
        f"{list(MEMORY_KINDS)}; for earlier turns recalled by relevance use memory=MemoryOptions() (EpisodicOptions), "
        "and chat_history=memory.get_all() to seed the conversation")


def build_memory(arg: MemoryArg, *, store: Any, retriever: Any, llm: Optional[LLM],
                 count_tokens: Optional[TokenCounter], query_engine: Any) -> Optional[ConversationMemory]:
    """Our memory for ``arg`` over the port's ``store`` (None: memory off). Recall takes Milvus and the embedding
    model from the retriever (a ``MilvusHybridRetriever``); with another, pass a built ``ConversationMemory``."""
    if arg.built is not None:
        memory = arg.built
    elif arg.options is None:
        return None
    else:
        o = arg.options
        milvus = retriever.retriever if isinstance(retriever, ConversationalRetriever) else retriever
        needs_milvus = o.episodic.enabled or o.facts.enabled
        if needs_milvus and not isinstance(milvus, MilvusHybridRetriever):
            raise ConfigurationError(
                f"memory=MemoryOptions(...) takes Milvus and the embedding model from a MilvusHybridRetriever (the "
                f"engine has {type(milvus).__name__}); pass memory=ConversationMemory.from_defaults(options, "
                "store=<conversation_store>, embed_model=..., target=...) instead")
        models = list(milvus.embed_models.values()) if isinstance(milvus, MilvusHybridRetriever) else []
        memory = ConversationMemory.from_defaults(
            o, store=store, embed_model=models[0] if models else None,
            client=milvus.client if isinstance(milvus, MilvusHybridRetriever) else None,
            target=milvus.target if isinstance(milvus, MilvusHybridRetriever) else None,
            llm=llm, core_memory=arg.core, count_tokens=count_tokens)
    if query_engine is not None and memory.parts:
        raise ConfigurationError("memory needs the engine to write the answer's prompt; with query_engine= the "
                                 "query engine writes it (pass retriever= to use memory)")
    return memory


# --- a turn's memory blocks ------------------------------------------------------------------------------------
def memory_items(loaded: LoadedMemory) -> Tuple[Dict[str, List[str]], List[int]]:
    """Each memory block's items in cut order (the recalled messages best first, facts oldest first, core blocks by
    priority), and the recalled messages' positions (parallel to their items)."""
    items: Dict[str, List[str]] = {name: [] for name in MEMORY_BLOCKS}
    items["memory_blocks"] = [f"{name}:\n{text}" for name, text in loaded.core]
    items["facts"] = [f"- {f.text}" for f in loaded.facts]
    if loaded.summary is not None and loaded.summary.text.strip():
        items["summary"] = [loaded.summary.text]
    units = loaded.recall.units if loaded.recall is not None else []
    items["recalled"] = [f"[#{u.position}{f' ({u.date})' if u.date else ''}] {u.speaker}: {u.text}" for u in units]
    return items, [u.position for u in units]


def frame_text(items: Dict[str, List[str]], placement: str) -> str:
    """The fixed text memory adds to the prompt when any block has items: the section's wrapper and the headings
    of the blocks that have items (counted with the system prompt: never cut)."""
    if not any(items.values()):
        return ""
    prompt = MEMORY_QUERY_PROMPT if placement == "query" else MEMORY_SECTION_PROMPT
    wrapper = prompt.get_template().replace("{memory}", "").replace("{question}", "")
    return "\n".join([wrapper, *(MEMORY_HEADINGS[n] for n in MEMORY_BLOCKS if items[n] and n in MEMORY_HEADINGS)])


def render_memory(items: Dict[str, List[str]], positions: Sequence[int], report: BlockReport) -> str:
    """The kept memory items as one text, each block under its heading; the recalled messages in conversation
    order ("" when nothing was kept)."""
    parts = []
    for name in MEMORY_BLOCKS:
        kept = report.kept.get(name, [])
        if name == "recalled":
            kept = sorted(kept, key=lambda i: positions[i])
        lines = [items[name][i] for i in kept]
        if not lines:
            continue
        heading = MEMORY_HEADINGS.get(name)
        parts.append("\n".join([heading, *lines]) if heading else "\n\n".join(lines))
    return "\n\n".join(parts)


@dataclass
class MemoryFit:
    """What :func:`fit_with_memory` decided: the report, the blocks it fitted, the memory text and where it goes."""

    report: BlockReport
    blocks: Dict[str, List[str]]
    memory_text: str
    placement: str
    recalled_positions: List[int]

    def kept_positions(self) -> List[int]:
        """The positions of the recalled messages the budget kept."""
        return sorted(self.recalled_positions[i] for i in self.report.kept.get("recalled", []))

    def context_record(self) -> Dict[str, Any]:
        """The turn record's ``context``: every kept block's items in prompt order, the memory text and where it
        went: the turn as the model saw it (with the synthesizer's template and the question)."""
        return {"placement": self.placement, "memory_text": self.memory_text,
                "blocks": [[name, list(kept)] for name, kept in assemble(self.blocks, self.report)]}


def fit_with_memory(*, loaded: LoadedMemory, system: str, question: str, chunks: Sequence[str],
                    history: Sequence[str], placement: str, count_tokens: Callable[[str], int],
                    context_window: int, reserved_output: int, budget_ratio: float,
                    max_context_tokens: Optional[int],
                    narrow_chunks: Optional[Sequence[Optional[str]]] = None) -> MemoryFit:
    """Fit the turn's blocks under the budget (``history``: formatted turns, oldest first; ``chunks``: best
    first; ``narrow_chunks[i]``: chunk ``i`` without its widening, None when not widened) and render the kept memory
    for ``placement`` (``system`` or ``query``). The fit's ``blocks`` hold the evidence as it is read: a chunk whose
    widening the budget cut, narrow."""
    if placement not in PLACEMENTS:
        raise ConfigurationError(f"placement must be one of {list(PLACEMENTS)}, got {placement!r}")
    items, positions = memory_items(loaded)
    frame = frame_text(items, placement)
    blocks: Dict[str, List[str]] = {"system": [t for t in (system, frame) if t], "question": [question],
                                    "evidence": list(chunks), "history": list(history), **items}
    report = fit_blocks(blocks, count_tokens=count_tokens, context_window=context_window,
                        reserved_output=reserved_output, budget_ratio=budget_ratio,
                        limits={"evidence": max_context_tokens}, narrow_chunks=narrow_chunks)
    for i in report.narrowed:
        blocks["evidence"][i] = narrow_chunks[i]  # type: ignore[index,assignment]
    return MemoryFit(report, blocks, render_memory(items, positions, report), placement, positions)


__all__ = ["MEMORY_BLOCKS", "MEMORY_KINDS", "MemoryArg", "MemoryFit", "PLACEMENTS", "build_memory",
           "fit_with_memory", "frame_text", "memory_arg", "memory_items", "render_memory"]
