import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.synthesizers.citations import (citation_metadata, has_answer_text, invalid_markers,
                                                        neutralise_markers, number_chunks, parse_citations,
                                                        parse_markers, source_texts, strip_markers)


def test_number_chunks_is_one_based():
    assert number_chunks([" a ", "b"]) == ["[1] a", "[2] b"]


def test_source_text_that_looks_like_a_marker_is_never_a_marker():
    assert neutralise_markers("as shown [2] and [1, 4]; not [a] or [1.5]") == \
        "as shown \uff3b2\uff3d and \uff3b1, 4\uff3d; not [a] or [1.5]"
    assert number_chunks(["Tampa hosted it [12].", "x"]) == ["[1] Tampa hosted it \uff3b12\uff3d.", "[2] x"]
    assert parse_markers(" ".join(number_chunks(["a footnote [2]", "b [3][4]"]))) == [1, 2]
    message = object()
    assert source_texts(["see [3]", message]) == ["see \uff3b3\uff3d", message]  # only text is rewritten
    assert parse_citations(neutralise_markers("copied footnote [2]"), ["a", "b"]) == []


def test_markers_in_order_of_first_use_each_once():
    assert parse_markers("x [2] y [1, 3] z [2][4] [a] [1.5]") == [2, 1, 3, 4]


def test_parse_citations_maps_markers_and_drops_invented_ones():
    nodes = [NodeWithScore(node=TextNode(text=t, id_=i)) for t, i in (("a", "A"), ("b", "B"), ("c", "C"))]
    assert parse_citations("see [3] and [1]; also [9]", nodes) == [
        {"marker": 3, "node_id": "C", "source_index": 2},
        {"marker": 1, "node_id": "A", "source_index": 0},
    ]
    assert parse_citations("[2]", [n.node for n in nodes]) == [{"marker": 2, "node_id": "B", "source_index": 1}]
    assert parse_citations("no markers", nodes) == []


def test_invalid_markers_are_counted_in_order_of_first_use():
    assert invalid_markers("[7] then [0], [2] and [7][12]", 5) == [7, 0, 12]
    assert invalid_markers("no markers", 0) == []
    nodes = [TextNode(text="a", id_="A")]
    assert citation_metadata("[1] and [3]", nodes) == {
        "citations": [{"marker": 1, "node_id": "A", "source_index": 0}], "invalid_citation_markers": [3]}


@pytest.mark.parametrize("text", ["", "  ", "[1]", " [1][2].", "[1, 3]\n", "Source: [1]", "来源：[2]", "[1", "[2, "])
def test_markers_alone_are_no_answer_text(text):
    assert not has_answer_text(text)


@pytest.mark.parametrize("text", ["Tampa [1].", "1889", "[1] Paul Graham", "坦帕[1]", "Sources say yes"])
def test_a_word_or_number_outside_markers_is_answer_text(text):
    assert has_answer_text(text)


def test_strip_markers_removes_only_markers():
    assert strip_markers("Tampa [1], Florida [2, 3].") == "Tampa , Florida ."


@pytest.mark.parametrize("citations", [True, False])
def test_the_llm_never_sees_a_source_footnote_as_a_marker(citations):
    from llama_index_convrag.synthesizers import get_response_synthesizer
    from llama_index_convrag.testing import ScriptedLLM

    llm = ScriptedLLM.fixed("It was finished in 1889.")
    synth = get_response_synthesizer(llm=llm, response_mode="compact", citations=citations)
    nodes = [NodeWithScore(node=TextNode(text="The tower was finished in 1889 [2].", id_="A"), score=1.0),
             NodeWithScore(node=TextNode(text="Unrelated.", id_="B"), score=0.5)]
    synth.synthesize("When was it finished?", nodes)
    assert "1889 \uff3b2\uff3d." in llm.prompts[0] and "1889 [2]" not in llm.prompts[0]
