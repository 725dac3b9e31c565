"""What the real model answers through the chat engine (compact, citations on, each citation mode), asserted on the
answers: over a fixed set of questions, no shown answer is empty or only citation markers, and a majority contain
the gold answer that their passages hold. English and Chinese. With ``citation_mode="aligned"`` the model is never
asked for markers: it never answers with markers only (no answer recovered), and the answers holding the gold cite
the passage that holds it in a majority."""

from typing import List, Tuple

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_convrag.chat import AnswerOptions, ConvRAGChatEngine
from llama_index_convrag.chat.fallback import ANSWER_SOURCES
from llama_index_convrag.config import OpenAICompatible
from llama_index_convrag.synthesizers.citations import CITATION_MODES, has_answer_text
from tests.chat.conftest import store  # noqa: F401 - fixture

pytestmark = pytest.mark.real_llm

DISTRACTORS = [
    "Green tea should steep for two minutes in water at eighty degrees.",
    "The Berlin Wall fell in 1989, and Germany was reunified the next year.",
]
#: (question, gold, the passage holding it); the distractors come after it.
CASES: List[Tuple[str, str, str]] = [
    ("When was the Eiffel Tower completed?", "1889",
     "The Eiffel Tower in Paris was completed in 1889 for the World's Fair."),
    ("Who directed the film Inception?", "Nolan",
     "Inception is a 2010 science fiction film written and directed by Christopher Nolan."),
    ("Where was Super Bowl LV played?", "Tampa",
     "Super Bowl LV was played on February 7, 2021, at Raymond James Stadium in Tampa, Florida."),
    ("埃菲尔铁塔是哪一年建成的？", "1889", "埃菲尔铁塔于1889年建成，是为当年的世界博览会而建。"),
    ("2022年冬奥会在哪个城市举办？", "北京", "2022年冬季奥林匹克运动会于2022年2月在北京举办。"),
]


@pytest.fixture
def short_llm(real_llm_server):
    """Greedy, at most 80 answer tokens (a short answer; minutes per turn less on a loaded machine)."""
    return OpenAICompatible(**real_llm_server.client_kwargs(max_tokens=80))


class Passages(BaseRetriever):
    def __init__(self, texts: List[str]) -> None:
        super().__init__()
        self.nodes = [NodeWithScore(node=TextNode(text=t, id_=f"p{i}"), score=1.0 - i / 10) for i, t in enumerate(texts)]

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return list(self.nodes)


@pytest.mark.parametrize("citation_mode", CITATION_MODES)
def test_no_marker_only_answer_and_a_majority_contains_the_gold(short_llm, store, citation_mode) -> None:  # noqa: F811
    answers = []
    for question, gold, passage in CASES:
        engine = ConvRAGChatEngine.from_defaults(Passages([passage, *DISTRACTORS]), short_llm,
                                                 answer=AnswerOptions(citation_mode=citation_mode),
                                                 conversation_store=store)
        response = engine.chat(question)
        record = response.metadata["turn"]
        assert has_answer_text(response.response), (question, response.response)
        assert record.answer_source in ANSWER_SOURCES and record.grounding is not None
        if citation_mode == "aligned":
            assert record.answer_source == "llm", (question, response.response)  # nothing to recover
            assert record.citation_mode == ("aligned" if record.citations else None), record.citations
        answers.append((gold, response.response, [c["marker"] for c in record.citations]))
    contained = [(text, markers) for gold, text, markers in answers if gold.lower() in text.lower()]
    assert len(contained) * 2 > len(answers), answers
    if citation_mode == "aligned":  # the gold's passage is the first one
        assert sum(1 in markers for _, markers in contained) * 2 > len(contained), contained


def test_a_streamed_answer_is_never_a_bare_marker(short_llm, store) -> None:  # noqa: F811
    question, gold, passage = CASES[0]
    engine = ConvRAGChatEngine.from_defaults(Passages([passage, *DISTRACTORS]), short_llm, conversation_store=store)
    response = engine.stream_chat(question)
    deltas = list(response.response_gen)
    assert deltas and has_answer_text(deltas[0]), deltas  # the first delta shown already holds a word
    assert store.get_message(response.message_id).content == "".join(deltas)


def test_a_streamed_aligned_answer_is_cited_as_the_whole_one(short_llm, store) -> None:  # noqa: F811
    question, gold, passage = CASES[0]
    kwargs = dict(answer=AnswerOptions(citation_mode="aligned"), conversation_store=store)
    whole = ConvRAGChatEngine.from_defaults(Passages([passage, *DISTRACTORS]), short_llm, **kwargs).chat(question)
    streamed = ConvRAGChatEngine.from_defaults(Passages([passage, *DISTRACTORS]), short_llm,
                                               **kwargs).stream_chat(question)
    assert "".join(streamed.response_gen) == whole.response  # greedy decoding: the same answer, the same markers
    assert store.get_turn_record(streamed.message_id)["citations"] == whole.metadata["turn"].to_dict()["citations"]
