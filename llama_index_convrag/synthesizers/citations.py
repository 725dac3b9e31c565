"""Pure citation helpers: number chunks ``[1]..[n]`` for the prompt, parse ``[n]`` markers, map them to nodes, and
tell an answer from a reply that is only markers (``[1]``: no answer a reader can use).

Source text that looks like a marker (a footnote ``[2]``, ``[1, 4]``) is written with full-width brackets
(``［2］``) before an answer is written from it (:func:`source_texts`, also inside :func:`number_chunks`), so a
footnote an answer copies is never read as a citation of another passage."""

from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Sequence

from llama_index_convrag.errors import ConfigurationError

logger = logging.getLogger(__name__)

INLINE, ALIGNED = "inline", "aligned"
CITATION_MODES = (INLINE, ALIGNED)
"""How ``citations=True`` cites: ``inline``: the prompt numbers the passages and asks the LLM to write ``[n]``;
``aligned``: the LLM is asked without any citation instruction (the plain templates) and each answer sentence is
then cited with the passage that supports it (``grounding.cite_sentences``; no LLM call)."""

# "[3]" or "[1, 4]" / "[1][4]"; not "[a]" nor "[12.5]".
MARKER_RE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
#: What a marker-only reply may hold besides markers: a label naming the source ("Source: [1]", "来源：[1]").
_SOURCE_LABEL = re.compile(r"\b(?:sources?|references?|citations?)\b|来源|出处|参考", re.IGNORECASE)
#: A marker still being streamed at the end of the text ("... [1", "[2, ").
_OPEN_MARKER = re.compile(r"\[\s*\d*(?:\s*,\s*\d*)*\s*$")


def check_citation_mode(citation_mode: Any) -> str:
    """``citation_mode`` when it is one of :data:`CITATION_MODES`; else a ``ConfigurationError`` naming it and them."""
    if not isinstance(citation_mode, str) or citation_mode not in CITATION_MODES:
        raise ConfigurationError(f"citation_mode must be one of {list(CITATION_MODES)}, got {citation_mode!r}")
    return citation_mode


#: The brackets a marker-like footnote of source text is written with (full-width: read alike, never parsed).
SOURCE_BRACKETS = ("\uff3b", "\uff3d")


def neutralise_markers(text: str) -> str:
    """``text`` with each marker-like run (``[2]``, ``[1, 4]``) written in :data:`SOURCE_BRACKETS`."""
    return MARKER_RE.sub(lambda m: f"{SOURCE_BRACKETS[0]}{m.group(1)}{SOURCE_BRACKETS[1]}", text)


def source_texts(chunks: Sequence[Any]) -> List[Any]:
    """The passages as an answer reads them: text chunks through :func:`neutralise_markers` (others unchanged)."""
    return [neutralise_markers(c) if isinstance(c, str) else c for c in chunks]


def number_chunks(texts: Sequence[str]) -> List[str]:
    """Prefix each chunk with its 1-based marker: ``"[1] first chunk"`` (the chunk's own marker-like text
    neutralised)."""
    return [f"[{i}] {neutralise_markers(text.strip())}" for i, text in enumerate(texts, start=1)]


def strip_markers(text: str) -> str:
    """``text`` without its ``[n]`` markers (nothing else changed)."""
    return MARKER_RE.sub("", text)


def has_answer_text(text: str) -> bool:
    """Whether ``text`` holds a letter or digit outside its markers and source labels: False for ``""``, ``"[1]"``,
    ``" [1][2]."``, ``"Source: [1]"``; True for ``"Tampa [1]."``. A marker not yet closed at the end (a stream cut
    mid-marker, ``"[1"``) counts as a marker."""
    rest = _SOURCE_LABEL.sub("", _OPEN_MARKER.sub("", strip_markers(text)))
    return any(ch.isalnum() for ch in rest)


def parse_markers(text: str) -> List[int]:
    """Marker numbers in order of first use, each once."""
    seen: List[int] = []
    for match in MARKER_RE.finditer(text):
        for part in match.group(1).split(","):
            n = int(part)
            if n not in seen:
                seen.append(n)
    return seen


def parse_citations(text: str, source_nodes: Sequence[Any]) -> List[Dict[str, Any]]:
    """Citations the answer used: ``{"marker", "node_id", "source_index"}`` in order of first use.

    Marker ``n`` maps to ``source_nodes[n - 1]`` (``NodeWithScore`` or ``BaseNode``); markers outside
    ``1..len(source_nodes)`` are dropped with a warning (the model invented them).
    """
    citations: List[Dict[str, Any]] = []
    for n in parse_markers(text):
        if not 1 <= n <= len(source_nodes):
            logger.warning("answer cites [%d] but only %d sources were given; dropped", n, len(source_nodes))
            continue
        node = source_nodes[n - 1]
        node_id = node.node.node_id if hasattr(node, "node") else node.node_id
        citations.append({"marker": n, "node_id": node_id, "source_index": n - 1})
    return citations


def invalid_markers(text: str, num_sources: int) -> List[int]:
    """Marker numbers outside ``1..num_sources`` (invented by the model), in order of first use."""
    return [n for n in parse_markers(text) if not 1 <= n <= num_sources]


def citation_metadata(text: str, source_nodes: Sequence[Any]) -> Dict[str, Any]:
    """``citations`` (:func:`parse_citations`) and ``invalid_citation_markers`` (:func:`invalid_markers`)."""
    return {"citations": parse_citations(text, source_nodes),
            "invalid_citation_markers": invalid_markers(text, len(source_nodes))}
