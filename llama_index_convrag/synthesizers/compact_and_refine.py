"""Compact: pack the chunks into windows as core does (``compact.py``: the prompt helper's splitter and overlap; the
prompt measured with the extra variables filled), then refine across the windows.

The room kept for the existing answer is ``min(response_padding_size, num_output)``: the answer was written within
``num_output`` tokens, so core's 500 (with 256 or 128 of output) only shrinks every window, and with a long extra
variable leaves no room at all. An answer longer than that (an LLM ignoring its limit) is still safe: the refine step
splits its window again (``Refine._refit``).
"""

from __future__ import annotations

from typing import List

from llama_index_convrag.synthesizers.base import Shape
from llama_index_convrag.synthesizers.compact import Compacts
from llama_index_convrag.synthesizers.refine import Refine
from llama_index_convrag.synthesizers.types import ResponseMode


class CompactAndRefine(Compacts, Refine):
    """Refine over packed windows instead of single chunks."""

    mode = ResponseMode.COMPACT.value

    def _compact_shapes(self) -> List[Shape]:
        """Core's: the bigger of the QA and refine prompts, with room kept for the existing answer (module doc)."""
        helper = self._chat_prompt_helper if self._multimodal else self._prompt_helper
        padding = min(self._response_padding_size, helper.num_output)
        return [
            (self._qa, self._ctx(""), padding),
            (self._refine, {**self._ctx("", "context_msg"), "existing_answer": ""}, padding),
        ]
