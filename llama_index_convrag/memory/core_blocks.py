"""A LlamaIndex core ``Memory``'s memory blocks inside our turn: read into the budget, fed what leaves the window.

Core's ``Memory`` keeps a FIFO of messages and, when it overflows, hands the oldest messages to its memory blocks
(``StaticMemoryBlock``, ``FactExtractionMemoryBlock``, ``VectorMemoryBlock``, your own); when read, each block's
content is put into the system message. Our engine keeps the conversation in its store and fits the prompt under one
budget, so :class:`CoreBlocks` does the two block calls itself:

* :meth:`CoreBlocks.read`: each block's content for this turn (``aget`` with the recent history and the question),
  as text, one item per block, highest core priority first (priority 0, which core never truncates, first of all):
  the items of our ``memory_blocks`` budget block, cut lowest priority first;
* :meth:`CoreBlocks.put`: the messages that left the recent window this turn go to every block (``aput`` with
  ``from_short_term_memory=True``; a block that does not accept them skips them, as in core), after the commit.

Core's own token limits (``token_limit``, ``chat_history_token_ratio``) do not apply: the engine's budget does.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple

from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.memory import Memory

from llama_index_convrag.errors import ConfigurationError


def block_text(name: str, content: Any) -> str:
    """A block's content as text: a string as it is; content blocks' texts joined; chat messages as
    ``role: text`` lines. Anything else (an image block) is refused naming the block."""
    if not content:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(c, ChatMessage) for c in content):
        return "\n".join(f"{c.role.value}: {c.content or ''}" for c in content)
    if isinstance(content, list) and all(isinstance(c, TextBlock) for c in content):
        return "\n".join(c.text for c in content)
    kinds = sorted({type(c).__name__ for c in content}) if isinstance(content, list) else [type(content).__name__]
    raise ConfigurationError(f"memory block {name!r} returned {kinds}; the engine's budget holds text (a str, "
                             "TextBlocks or ChatMessages)")


class CoreBlocks:
    """The memory blocks of a core ``Memory`` (``memory.memory_blocks``, its ``session_id``)."""

    def __init__(self, memory: Memory) -> None:
        if not isinstance(memory, Memory):
            raise ConfigurationError(f"CoreBlocks takes a llama_index.core.memory.Memory, got "
                                     f"{type(memory).__name__}")
        self._memory = memory

    @property
    def names(self) -> List[str]:
        return [b.name for b in self._blocks()]

    def _blocks(self) -> List[Any]:
        """Blocks by core priority: 0 (never truncated in core) first, then 1, 2, ... (1 is the highest)."""
        return sorted(self._memory.memory_blocks, key=lambda b: (b.priority != 0, b.priority))

    async def aread(self, history: Sequence[ChatMessage], question: str) -> List[Tuple[str, str]]:
        """``(block name, text)`` of every block with content, in :meth:`_blocks` order."""
        messages = [*history, ChatMessage(role="user", content=question)]
        out = []
        for block in self._blocks():
            text = block_text(block.name, await block.aget(messages, session_id=self._memory.session_id))
            if text.strip():
                out.append((block.name, text))
        return out

    def read(self, history: Sequence[ChatMessage], question: str) -> List[Tuple[str, str]]:
        """Sync twin of :meth:`aread` (core's blocks are async: run on a loop of their own)."""
        return asyncio_run(self.aread(history, question))

    async def aput(self, messages: Sequence[ChatMessage]) -> int:
        """Give ``messages`` (those that left the window) to every block; how many blocks were called."""
        if not messages:
            return 0
        for block in self._memory.memory_blocks:
            await block.aput([m.model_copy() for m in messages], from_short_term_memory=True,
                             session_id=self._memory.session_id)
        return len(self._memory.memory_blocks)

    def put(self, messages: Sequence[ChatMessage]) -> int:
        """Sync twin of :meth:`aput`."""
        return asyncio_run(self.aput(messages))


__all__ = ["CoreBlocks", "block_text"]
