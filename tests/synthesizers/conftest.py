"""Helpers for synthesizer tests: nodes from texts, core's default template strings, token counting."""

from __future__ import annotations

from typing import List, Sequence

import pytest
from llama_index.core.prompts.default_prompts import (
    DEFAULT_REFINE_PROMPT_TMPL,
    DEFAULT_TEXT_QA_PROMPT_TMPL,
    DEFAULT_TREE_SUMMARIZE_TMPL,
)
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.synthesizers.packing import TiktokenTokenizer

QA = DEFAULT_TEXT_QA_PROMPT_TMPL
REFINE = DEFAULT_REFINE_PROMPT_TMPL
SUMMARY = DEFAULT_TREE_SUMMARIZE_TMPL
TOKENIZER = TiktokenTokenizer()


def make_nodes(texts: Sequence[str]) -> List[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 100) for i, t in enumerate(texts)]


def tokens(text: str) -> int:
    return len(TOKENIZER.encode(text))


def qa(context: str, query: str = "q?") -> str:
    return QA.format(context_str=context, query_str=query)


def refine(answer: str, context: str, query: str = "q?") -> str:
    return REFINE.format(query_str=query, existing_answer=answer, context_msg=context)


@pytest.fixture
def three_nodes() -> List[NodeWithScore]:
    return make_nodes(["alpha fact", "beta fact", "gamma fact"])
