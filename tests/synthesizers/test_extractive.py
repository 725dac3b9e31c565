"""The extractive mode with the real local embedding model (session fixture ``embed_model``)."""

import re

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_convrag.synthesizers import Extractive, ResponseMode, get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

from .conftest import make_nodes

TEXTS = [
    "The Eiffel Tower is in Paris. It was finished in 1889. Tickets are sold online.",
    "Mount Fuji is the highest mountain in Japan. It last erupted in 1707.",
    "The Eiffel Tower is 330 metres tall. Its paint is renewed every seven years.",
]


@pytest.fixture
def synth(embed_model):
    return get_response_synthesizer(response_mode="extractive", embed_model=embed_model, streaming=False)


def test_picks_the_closest_sentences_in_document_order_with_markers(synth):
    response = synth.synthesize("Tell me the Eiffel Tower facts", make_nodes(TEXTS))
    assert response.response == (
        "The Eiffel Tower is in Paris. It was finished in 1889. [1] The Eiffel Tower is 330 metres tall. [3]"
    )  # "It was finished in 1889." borrows its predecessor's terms; the paint and the tickets score under the share
    assert response.metadata["citations"] == [
        {"marker": 1, "node_id": "n0", "source_index": 0},
        {"marker": 3, "node_id": "n2", "source_index": 2},
    ]
    assert response.metadata["llm_calls"] == 0
    assert [n.node.node_id for n in response.source_nodes] == ["n0", "n1", "n2"]


LS_PAGE = [
    "NAME ls - list directory contents\n\nSYNOPSIS ls [OPTION]... [FILE]...\n\n"
    "DESCRIPTION List information about the FILEs (the current directory by default).\n\n"
    "-a, --all\n      do not ignore entries starting with .\n\n"
    "-A, --almost-all\n      do not list implied . and ..\n\n"
    "-l     use a long listing format",
    "Written by Richard M. Stallman and David MacKenzie.",
]


def _man_page(name: str) -> str:
    import shutil
    import subprocess

    if shutil.which("man") is None or shutil.which("col") is None:
        pytest.skip("man and col are needed to render a man page")
    text = subprocess.run(f"MANWIDTH=80 man {name} | col -bx", shell=True, capture_output=True, text=True).stdout
    if "--all" not in text:
        pytest.skip(f"no man page for {name}")
    return text


@pytest.mark.xfail(strict=True, reason="'hidden files' shares no word with 'entries starting with .' and MiniLM ranks "
                   "that line 21st of 47 for the question: no rule here knows the Unix convention; a known miss")
def test_a_how_to_question_on_the_ls_man_page_gets_the_option_line(embed_model):
    """A newcomer's case: the chunk holding ``-a, --all`` answered "NAME ls - list directory contents"."""
    from llama_index.core.node_parser import SentenceSplitter

    chunks = SentenceSplitter(chunk_size=700, chunk_overlap=50).split_text(_man_page("ls"))[:2]
    response = Extractive(embed_model).synthesize("How do I list hidden files with ls?", make_nodes(chunks))
    assert not response.response.startswith("NAME")
    assert "-a, --all do not ignore entries starting with ." in response.response


@pytest.mark.xfail(strict=True, reason="Snowball stems keep 'wrote' and 'written' apart (the hand stemmer before the "
                   "text layer joined them): the authors' line is shortlisted (reserve_evidence) but shares no term, "
                   "and MiniLM ranks '-l use a long listing format' above it; a known miss")
def test_a_who_question_gets_the_names_and_an_initial_does_not_split(embed_model):
    response = Extractive(embed_model, max_sentences=1).synthesize("Who wrote ls?", make_nodes(LS_PAGE))
    assert response.response == "Written by Richard M. Stallman and David MacKenzie. [2]"


def test_a_pronoun_brings_the_sentence_before_it(embed_model):
    response = Extractive(embed_model, max_sentences=1).synthesize(
        "When was it finished?", make_nodes(TEXTS)
    )
    assert response.response == "The Eiffel Tower is in Paris. It was finished in 1889. [1]"


def test_embed_cap_one_keeps_the_best_cheap_score(embed_model):
    """With one sentence embedded the answer is the sentence the term, type and rank scores put first."""
    from llama_index_convrag.synthesizers import sentences as S

    query = "When did Mount Fuji last erupt?"
    candidates = S.sentences_of(TEXTS)
    best = S.shortlist(S.cheap_scores(S.question_of(query), candidates), 1)[0]
    response = Extractive(embed_model, max_sentences=3, embed_cap=1).synthesize(query, make_nodes(TEXTS))
    assert best == 4
    assert response.response == "Mount Fuji is the highest mountain in Japan. It last erupted in 1707. [2]"


def test_token_limit_and_sentence_limit(embed_model):
    long_first = ["The Eiffel Tower is 330 metres tall and " + "very " * 40 + "famous.", TEXTS[1], TEXTS[2]]
    response = Extractive(embed_model, max_sentences=2, max_tokens=30).synthesize(
        "How tall is the Eiffel Tower?", make_nodes(long_first)
    )
    chosen = response.response
    assert "very very" not in chosen  # the long best sentence does not fit in 30 tokens
    assert chosen == "The Eiffel Tower is 330 metres tall. [3]"  # the others score under 0.6 of the best


def test_chinese_sentences_are_split_and_cited(embed_model):
    nodes = make_nodes(["北京是中国的首都。长城很长！", "The capital of China is Beijing. Pandas eat bamboo."])
    response = Extractive(embed_model, max_sentences=1).synthesize("What is the capital of China?", nodes)
    assert response.response == "The capital of China is Beijing. [2]"
    one_chinese = Extractive(embed_model, max_sentences=2).synthesize("北京", make_nodes(["北京是中国的首都。长城很长！"]))
    assert one_chinese.response == "北京是中国的首都。 [1]"  # 长城很长！ shares nothing with the question


def test_metadata_is_not_quoted(embed_model):
    node = TextNode(text="Fuji is 3776 metres high.", id_="a", metadata={"file_path": "fuji.txt"})
    response = Extractive(embed_model).synthesize("How high is Fuji?", [NodeWithScore(node=node, score=1.0)])
    assert response.response == "Fuji is 3776 metres high. [1]"


def test_streaming_sync_and_async(embed_model):
    synth = get_response_synthesizer(response_mode="extractive", embed_model=embed_model, streaming=True)
    response = synth.synthesize("When did Mount Fuji last erupt?", make_nodes(TEXTS))
    text = "".join(response.response_gen)
    assert text.endswith("[2]")
    assert response.metadata["citations"][-1]["node_id"] == "n1"


async def test_async_matches_sync(embed_model):
    synth = Extractive(embed_model, max_sentences=2)
    nodes = make_nodes(TEXTS)
    sync = synth.synthesize("How tall is the Eiffel Tower?", nodes)
    again = await synth.asynthesize("How tall is the Eiffel Tower?", nodes)
    assert again.response == sync.response
    assert again.metadata["citations"] == sync.metadata["citations"]
    stream = await Extractive(embed_model, max_sentences=2, streaming=True).asynthesize(
        "How tall is the Eiffel Tower?", nodes
    )
    assert "".join([d async for d in stream.async_response_gen()]) == sync.response


def test_empty_inputs(embed_model):
    synth = Extractive(embed_model)
    assert synth.synthesize("q?", []).response == "Empty Response"
    assert synth.synthesize("q?", make_nodes(["...", "  "])).response == "Empty Response"
    cut = Extractive(embed_model, similarity_cutoff=0.99).synthesize("bananas?", make_nodes(TEXTS))
    assert cut.response == "Empty Response"


def test_registered_and_default_embed_model_is_local():
    from llama_index_convrag.embeddings import LocalMiniLMEmbedding

    synth = get_response_synthesizer(response_mode=ResponseMode.EXTRACTIVE)
    assert isinstance(synth, Extractive)
    assert isinstance(synth._embed_model, LocalMiniLMEmbedding)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_sentences": 0}, "max_sentences must be an int >= 1, got 0"),
        ({"max_tokens": 0}, "max_tokens must be None or an int >= 1, got 0"),
        ({"citations": False}, "always cite their sources"),
        ({"embed_cap": 0}, "embed_cap must be None or an int >= 1, got 0"),
    ],
)
def test_bad_options_are_named(embed_model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        Extractive(embed_model, **kwargs)


def test_factory_ignores_an_llm_and_rejects_embed_model_where_unused(embed_model):
    llm = ScriptedLLM.echo()
    synth = get_response_synthesizer(llm=llm, response_mode="extractive", embed_model=embed_model)
    assert synth.synthesize("How tall is the Eiffel Tower?", make_nodes(TEXTS)).response.endswith("[3]")
    assert llm.call_count == 0
    with pytest.raises(ValueError, match=r"embed_model is used by \['extractive'\], not 'compact'"):
        get_response_synthesizer(llm=ScriptedLLM.echo(), response_mode="compact", embed_model=embed_model)
    with pytest.raises(TypeError, match="embed_model must be a llama_index BaseEmbedding, got str"):
        Extractive("minilm")  # type: ignore[arg-type]


def test_readme_command_one_answers_both_turns_from_the_repository_docs(capsys, repository_docs, monkeypatch):
    """README's first command (retrieval-only ``convrag chat docs/`` with its two questions) over this checkout's
    docs: each answer quotes the sentence that answers it, and no Markdown table is quoted whole."""
    import io

    from llama_index_convrag.cli import main

    docs, uri = repository_docs
    monkeypatch.setattr("sys.stdin", io.StringIO("How does one chat turn flow?\n"
                                                 "What happens to the placeholder when it fails?\n"))
    assert main(["chat", str(docs), "--uri", uri]) == 0
    answers = [line for line in capsys.readouterr().out.splitlines() if line.startswith("answer> ")]
    assert len(answers) == 2
    assert "stores your message" in answers[0] and "placeholder" in answers[0]
    # the fact, as the guide words it or as the faults table does (which of the two ranks first moves with the docs)
    assert re.search(r"placeholder (assistant message is finalised with the status|found `pending`, marked) `error`",
                     answers[1]), answers[1]
    assert not any("|---" in a or "| --- |" in a for a in answers)


def test_a_how_tall_question_quotes_only_the_sentence_with_a_number(synth):
    response = synth.synthesize("How tall is the Eiffel Tower?", make_nodes(TEXTS))
    assert response.response == "The Eiffel Tower is 330 metres tall. [3]"  # "The Eiffel Tower is in Paris." has none


def test_a_when_question_quotes_only_the_sentences_that_hold_a_date(embed_model):
    """Sentences repeating every word of the question but holding no date are not quoted; a full date outranks a
    month and a year."""
    chunks = ["Google has officially announced the Pixel 5a phone. The Pixel 5a was announced with a new camera.",
              "Google announced the Pixel 5 in October 2020 and the Pixel 5a in August 2021.",
              "The Pixel 5a was officially announced on August 17, 2021 via a press release."]
    response = Extractive(embed_model, max_sentences=1).synthesize("When was the Pixel 5a announced?",
                                                                  make_nodes(chunks))
    assert response.response == "The Pixel 5a was officially announced on August 17, 2021 via a press release. [3]"
    response = Extractive(embed_model).synthesize("When was the Pixel 5a announced?", make_nodes(chunks))
    assert "new camera" not in response.response and "officially announced the Pixel 5a phone" not in response.response


def test_a_footnote_quoted_from_a_passage_is_not_a_citation(synth):
    """A source's own "[2]" copied into the answer would cite another passage: it is quoted as \uff3b2\uff3d."""
    texts = ["The Eiffel Tower was finished in 1889 [2]. Tickets are sold online.",
             "Mount Fuji is the highest mountain in Japan."]
    response = synth.synthesize("When was the Eiffel Tower finished?", make_nodes(texts))
    assert "1889 \uff3b2\uff3d" in response.response and response.response.endswith("[1]")
    assert response.metadata["citations"] == [{"marker": 1, "node_id": "n0", "source_index": 0}]
