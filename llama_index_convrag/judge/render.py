"""Render a :class:`SearchTree`: Mermaid flowchart text (pure) and a PNG (matplotlib, imported only when called;
``pip install llama-index-convrag[eval]``)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Dict, List, Tuple, Union

from llama_index_convrag.judge.tree import GradedChunk, SearchNode, SearchTree

LABEL_CHARS = 60
# fill colours by chunk status (question nodes are blue)
COLOURS = {"answers": "#b7e1b0", "enriched": "#d8ecb0", "kept": "#fbe6a4", "dropped": "#f4b6b0",
           "ungraded": "#dddddd", "pending": "#dddddd", "question": "#b8d4f0"}


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def _qid(node: SearchNode) -> str:
    return "q" + node.path.replace(".", "_")


def _cid(node: SearchNode, index: int) -> str:
    return f"{_qid(node)}_c{index}"


def chunk_label(chunk: GradedChunk) -> str:
    grade = "-" if chunk.grade is None else str(chunk.grade)
    return f"[{grade}] {chunk.status}: {_short(chunk.preview)}"


def question_label(node: SearchNode) -> str:
    label = f"Q{node.depth}: {_short(node.question)}"
    return label if node.answer is None else f"{label} / A: {_short(node.answer)}"


def to_mermaid(tree: SearchTree) -> str:
    """A Mermaid ``flowchart TD``: question nodes, chunk nodes styled by status, follow-up edges to sub-questions."""
    lines = ["flowchart TD"]
    for node in tree.root.walk():
        lines.append(f'    {_qid(node)}["{_mermaid_text(question_label(node))}"]:::question')
        for index, chunk in enumerate(node.chunks):
            lines.append(f'    {_cid(node, index)}["{_mermaid_text(chunk_label(chunk))}"]:::{chunk.status}')
            lines.append(f"    {_qid(node)} --> {_cid(node, index)}")
            if chunk.child is not None:
                lines.append(f'    {_cid(node, index)} -->|follow-up| {_qid(chunk.child)}')
    for status, colour in COLOURS.items():
        lines.append(f"    classDef {status} fill:{colour}")
    return "\n".join(lines) + "\n"


def _layout(tree: SearchTree) -> Tuple[Dict[str, Tuple[float, float]], List[Tuple[str, str]], Dict[str, Tuple[str, str]]]:
    """Positions (leaves left to right, one row per level), edges and (label, status) per box id."""
    pos: Dict[str, Tuple[float, float]] = {}
    edges: List[Tuple[str, str]] = []
    boxes: Dict[str, Tuple[str, str]] = {}
    next_x = [0.0]

    def place_question(node: SearchNode, row: int) -> float:
        qid = _qid(node)
        boxes[qid] = (question_label(node), "question")
        xs = []
        for index, chunk in enumerate(node.chunks):
            cid = _cid(node, index)
            boxes[cid] = (chunk_label(chunk), chunk.status)
            edges.append((qid, cid))
            if chunk.child is not None:
                x = place_question(chunk.child, row + 2)
                edges.append((cid, _qid(chunk.child)))
            else:
                x = next_x[0]
                next_x[0] += 1
            pos[cid] = (x, -(row + 1))
            xs.append(x)
        if not xs:
            xs, next_x[0] = [next_x[0]], next_x[0] + 1
        pos[qid] = (sum(xs) / len(xs), -row)
        return pos[qid][0]

    place_question(tree.root, 0)
    return pos, edges, boxes


def render_png(tree: SearchTree, path: Union[str, Path], *, dpi: int = 100) -> Path:
    """Draw the tree to ``path`` (PNG) and return it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("render_png needs matplotlib: pip install 'llama-index-convrag[eval]'") from exc
    pos, edges, boxes = _layout(tree)
    width = max(x for x, _ in pos.values()) + 1
    depth = -min(y for _, y in pos.values()) + 1
    fig, ax = plt.subplots(figsize=(max(4.0, 2.6 * width), max(2.0, 1.4 * depth)))
    for a, b in edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        ax.plot([x0, x1], [y0, y1], color="#888888", linewidth=0.8, zorder=1)
    for box, (label, status) in boxes.items():
        x, y = pos[box]
        ax.text(x, y, textwrap.fill(label, 28), ha="center", va="center", fontsize=6, zorder=2,
                bbox={"boxstyle": "round", "facecolor": COLOURS.get(status, "#ffffff"), "edgecolor": "#555555"})
    ax.set_xlim(-0.7, width - 0.3)
    ax.set_ylim(-depth + 0.4, 0.6)
    ax.axis("off")
    ax.set_title(f"judge search ({tree.status}): {tree.stats.llm_calls} LLM calls", fontsize=8)
    out = Path(path)
    fig.savefig(out, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return out
