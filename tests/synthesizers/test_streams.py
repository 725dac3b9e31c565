"""streams.py: finished text as a stream, and citations filled in only once a stream has been read to the end."""

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.synthesizers.streams import (
    acite_when_done,
    agen_of,
    astrip_label_stream,
    cite_when_done,
    gen_of,
    strip_answer_label,
    strip_label_stream,
)
from llama_index_convrag.testing import ScriptedLLM

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


# --- an answer label echoed from the prompt (Qwen2.5-0.5B began refine answers with "New Answer:") ---------------
@pytest.mark.parametrize("text, expected", [
    ("New Answer: The cat sat.", "The cat sat."),
    ("  refined answer :\tYes", "Yes"),
    ("Answer: 42", "42"),
    ("Answer is 42", "Answer is 42"),  # no colon: not a label
    ("The new answer: x", "The new answer: x"),  # only at the very start
    ("Answers: many", "Answers: many"),
    ("New Answer:\nline two", "\nline two"),  # only blanks on the label's own line go
])
def test_strip_answer_label(text, expected):
    assert strip_answer_label(text) == expected


@pytest.mark.parametrize("deltas, expected", [
    (["New", " Answer", ": The", " cat"], ["The", " cat"]),
    (["New Answer:", " The cat"], ["The cat"]),
    (["Ne", "w idea"], ["New idea"]),  # held back while it could be a label, then passed on whole
    (["The", " answer: x"], ["The", " answer: x"]),  # decided at once: no delay
    (["Answer"], ["Answer"]),  # a stream that ends undecided is flushed as it is
    (["Answer:", "", "  ", "Yes"], ["Yes"]),
])
def test_strip_label_stream_holds_back_only_what_could_be_a_label(deltas, expected):
    assert list(strip_label_stream(iter(deltas))) == expected


async def test_astrip_label_stream_is_the_async_twin():
    async def deltas():
        for d in ["New", " Answer", ": The", " cat"]:
            yield d

    assert [d async for d in astrip_label_stream(deltas())] == ["The", " cat"]


def test_refine_answers_lose_the_echoed_label_sync_and_streamed(three_nodes):
    replies = ["New Answer: A1", "New Answer: A2", "New Answer: A3"]
    response = get_response_synthesizer(llm=ScriptedLLM.cycle(replies), response_mode="refine").synthesize(
        "q?", three_nodes)
    assert response.response == "A3"
    llm = ScriptedLLM.cycle(replies)
    streamed = get_response_synthesizer(llm=llm, response_mode="refine", streaming=True).synthesize("q?", three_nodes)
    assert "".join(streamed.response_gen) == "A3"
    assert "existing answer: A1\n" in llm.prompts[1]  # the intermediate answer fed back without its label
