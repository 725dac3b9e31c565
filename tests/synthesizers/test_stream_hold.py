"""StreamHold: the one hold of a streamed answer. What it holds and why, a stream in deltas of any size cited and
widened as the whole answer is, the text held when a stream fails, the metadata written at the end."""

from __future__ import annotations

from typing import Any, List, Optional

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.synthesizers.completion import COMPLETION_KEY, complete_answer
from llama_index_convrag.synthesizers.grounding import cite_sentences, grounding_record
from llama_index_convrag.synthesizers.stream_hold import (GROUNDING_KEY, SENTENCE, SHORT, StreamHold, aheld_stream,
                                                          held_stream)

TEXTS = ["The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
         "Green tea should steep for two minutes in water at eighty degrees."]
ANSWER = "Tea steeps for two minutes. The tower was completed in 1889! Napoleon painted it."
NODES = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0) for i, t in enumerate(["a", "b"])]


def aligned(passages: List[str] = TEXTS, question: Optional[str] = None, **kw: Any) -> StreamHold:
    return StreamHold(passages, question, align=True, **kw)


def pieces(hold: StreamHold, deltas: List[str]) -> List[str]:
    return [hold.feed(d) for d in deltas] + [hold.end()]


def test_sentences_are_cited_as_they_end_and_the_reason_is_named() -> None:
    passages = ["埃菲尔铁塔在1889年为世界博览会建成。"]
    hold = aligned(passages)
    out = []
    for delta in ["埃菲尔铁塔于", "1889年建成。", "它很", "高。"]:
        out.append((hold.feed(delta), hold.held_for))
    assert out == [("埃菲尔铁塔于", None), ("1889年建成", SENTENCE), ("[1]。它很", None), ("高", SENTENCE)]
    assert hold.end() == "。" and hold.held_for is None
    assert hold.text == cite_sentences("埃菲尔铁塔于1889年建成。它很高。", passages)


@pytest.mark.parametrize("answer", [
    ANSWER,
    "In short:\n- The tower was completed in 1889.\n- Tea steeps for two minutes.",
    "The tower, e.g. the one in Paris, was completed in 1889. Tea steeps 2.5 minutes.",
    "| tower | 1889 |\n|---|---|\n| tea | two minutes |\n\nThe tower was completed in 1889.",
    "埃菲尔铁塔于1889年建成。茶要泡两分钟。",
])
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_a_stream_in_deltas_of_any_size_cites_and_judges_as_the_whole_answer(answer: str, size: int) -> None:
    # sentences are split only once a delta brings a character a sentence can end at; any cut gives the same text,
    # and the grounding judged while citing is the one a second pass over the whole answer would give
    hold = aligned(metadata={})
    text = "".join(pieces(hold, [answer[i:i + size] for i in range(0, len(answer), size)]))
    assert text == cite_sentences(answer, TEXTS)
    assert hold.metadata[GROUNDING_KEY] == grounding_record(text, TEXTS)


def test_a_marker_the_model_streams_anyway_is_kept_and_its_sentence_not_cited_again() -> None:
    deltas = ["Paris", " is big [", "2", "]. Tea", " steeps"]
    # what follows the last letter or digit waits (" [" until "2" comes)
    assert list(held_stream(iter(deltas), aligned())) == ["Paris", " is big", " [2", "]. Tea", " steeps", " [2]"]


def test_a_stream_that_fails_mid_sentence_passes_its_held_text_on_before_the_error() -> None:
    def failing() -> Any:
        yield "The tower was completed in 1889. Napoleon painted "
        raise ConnectionError("closed")

    got: List[str] = []
    with pytest.raises(ConnectionError):
        for delta in held_stream(failing(), aligned()):
            got.append(delta)
    assert got == ["The tower was completed in 1889 [1]. Napoleon painted", " "]


PASSAGES = ["It was built on April 29, 2015.", "汶川地震发生于2008年5月12日。", "由史蒂文·斯皮尔伯格执导。"]
QUESTION = "When was it built, when was the 汶川地震, who directed 电影?"


@pytest.mark.parametrize("size", [1, 2, 3, 7])
@pytest.mark.parametrize("answer", ["2015", "2015 [1].", "Tea steeps for two minutes. The tower was built in 2015.",
                                    "It was built in 2015", "2008年", "斯皮尔伯格导演了这部电影，它在2018年上映。"])
def test_a_short_answer_is_held_and_widened_as_the_whole_answer_is(answer: str, size: int) -> None:
    hold = aligned(PASSAGES, QUESTION, metadata={})
    streamed = "".join(held_stream(iter([answer[i:i + size] for i in range(0, len(answer), size)]), hold))
    whole, done = complete_answer(answer, PASSAGES, QUESTION)
    assert streamed == cite_sentences(whole, PASSAGES)
    assert (done is not None) == (answer in ("2015", "2015 [1].", "2008年"))
    assert hold.metadata.get(COMPLETION_KEY) == (None if done is None else done.to_dict())


def test_a_longer_answer_flows_once_it_cannot_be_short() -> None:
    hold = aligned([], "q?")
    assert [(hold.feed(d), hold.held_for) for d in ["One", " two", " three four five", " six", " seven"]] == [
        ("", SHORT), ("", SHORT), ("", SHORT), ("One two three four five six", None), (" seven", None)]
    assert list(held_stream(iter(["一二三四五", "六七八九十", "十一", "二"]), aligned([], "q?"))) == [
        "一二三四五六七八九十十一", "二"]


def test_a_failing_stream_keeps_what_was_held_widened() -> None:
    def failing() -> Any:
        yield "2015"
        raise RuntimeError("cut")

    out: List[str] = []
    with pytest.raises(RuntimeError, match="cut"):
        for delta in held_stream(failing(), aligned(["It was built on April 29, 2015."], "When was it built?")):
            out.append(delta)
    assert out == ["April 29, 2015 [1]"]


class Refuse:
    """A head rule: holds while the text is only "x"s, refuses a text of "x"s at the end."""

    def holding(self, head: str) -> Optional[str]:
        return "xs" if set(head) <= {"x"} else None

    def verdict(self, text: str) -> Optional[str]:
        return "xs" if set(text) <= {"x"} else None


def test_a_head_rule_holds_the_start_and_its_verdict_refuses_it() -> None:
    hold = StreamHold(rules=[Refuse()], metadata={}, nodes=NODES)
    assert [(hold.feed(d), hold.held_for) for d in ["x", "xx"]] == [("", "xs"), ("", "xs")]
    assert (hold.end(), hold.verdict, hold.held_text) == ("", "xs", "xxx")
    flowing = StreamHold(rules=[Refuse()])
    assert pieces(flowing, ["x", "y [2]", "!"]) == ["", "xy [2]", "!", ""] and flowing.verdict is None


def test_citations_are_mapped_once_the_stream_ended() -> None:
    metadata: dict = {}
    gen = held_stream(iter(["See [2]", " and [1][9]."]), StreamHold(nodes=NODES, metadata=metadata))
    assert next(gen) == "See [2]"
    assert metadata == {}  # nothing before the end
    assert list(gen) == [" and [1][9]."]
    assert metadata["citations"] == [
        {"marker": 2, "node_id": "n1", "source_index": 1},
        {"marker": 1, "node_id": "n0", "source_index": 0},
    ]  # [9] names no source: dropped


async def test_the_async_stream_is_the_twin() -> None:
    async def deltas() -> Any:
        for d in ["[1", "] yes"]:  # a marker split across deltas still counts
            yield d

    metadata: dict = {}
    assert [d async for d in aheld_stream(deltas(), StreamHold(nodes=NODES, metadata=metadata))] == ["[1", "] yes"]
    assert metadata["citations"] == [{"marker": 1, "node_id": "n0", "source_index": 0}]
