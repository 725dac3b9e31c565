import pytest
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from llama_index_convrag.rank_trail import TRAIL_KEY, add_stage, get_trail, hide_key, mark_ranked


def _n(text, score):
    return NodeWithScore(node=TextNode(text=text, metadata={"title": "T"}), score=score)


def test_trail_accumulates_and_stays_out_of_prompts():
    a = _n("alpha", 0.9)
    add_stage(a, "dense:embedding", 1, 0.9)
    add_stage(a, "fusion:rrf", 2, 0.03, k=60)
    assert get_trail(a) == [
        {"stage": "dense:embedding", "rank": 1, "score": 0.9},
        {"stage": "fusion:rrf", "rank": 2, "score": 0.03, "k": 60},
    ]
    assert TRAIL_KEY not in a.node.get_content(metadata_mode=MetadataMode.LLM)
    assert TRAIL_KEY not in a.node.get_content(metadata_mode=MetadataMode.EMBED)
    assert "title: T" in a.node.get_content(metadata_mode=MetadataMode.LLM)


def test_mark_ranked_uses_positions():
    nodes = mark_ranked([_n("a", 3.0), _n("b", 1.0)], "rerank")
    assert [get_trail(n)[-1]["rank"] for n in nodes] == [1, 2]


def test_rank_must_be_positive():
    with pytest.raises(ValueError, match="got 0"):
        add_stage(_n("a", 1.0), "x", 0, 1.0)


def test_hide_key_keeps_a_key_out_of_prompts_and_embeddings_once():
    node = TextNode(text="t", metadata={"k": 1})
    hide_key(node, "k")
    hide_key(node, "k")
    assert node.excluded_llm_metadata_keys == ["k"] and node.excluded_embed_metadata_keys == ["k"]
    assert "k" not in node.get_content(metadata_mode=MetadataMode.LLM)
