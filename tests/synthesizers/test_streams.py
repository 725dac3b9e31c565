"""streams.py: finished text as a stream, and citations filled in only once a stream has been read to the end."""

from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.synthesizers.streams import acite_when_done, agen_of, cite_when_done, gen_of

NODES = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0) for i, t in enumerate(["a", "b"])]


def test_gen_of_yields_the_text_once():
    assert list(gen_of("all of it")) == ["all of it"]


async def test_agen_of_yields_the_text_once():
    assert [d async for d in agen_of("all of it")] == ["all of it"]


def test_cite_when_done_passes_deltas_and_maps_markers_after_the_last():
    metadata: dict = {}
    gen = cite_when_done(iter(["See [2]", " and [1][9]."]), metadata, NODES)
    assert next(gen) == "See [2]"
    assert metadata == {}  # nothing before the end
    assert list(gen) == [" and [1][9]."]
    assert metadata["citations"] == [
        {"marker": 2, "node_id": "n1", "source_index": 1},
        {"marker": 1, "node_id": "n0", "source_index": 0},
    ]  # [9] names no source: dropped


async def test_acite_when_done_is_the_async_twin():
    async def deltas():
        for d in ["[1", "] yes"]:  # a marker split across deltas still counts
            yield d

    metadata: dict = {}
    assert [d async for d in acite_when_done(deltas(), metadata, NODES)] == ["[1", "] yes"]
    assert metadata["citations"] == [{"marker": 1, "node_id": "n0", "source_index": 0}]
