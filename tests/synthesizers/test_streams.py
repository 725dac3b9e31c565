"""streams.py: finished text as a stream, and the answer label a model echoes taken off a reply or a stream."""

import pytest

from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.synthesizers.streams import (
    agen_of,
    astrip_label_stream,
    gen_of,
    strip_answer_label,
    strip_label_stream,
)
from llama_index_convrag.testing import ScriptedLLM



def test_gen_of_yields_the_text_once():
    assert list(gen_of("all of it")) == ["all of it"]


async def test_agen_of_yields_the_text_once():
    assert [d async for d in agen_of("all of it")] == ["all of it"]


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
