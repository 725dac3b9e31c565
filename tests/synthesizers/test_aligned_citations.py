"""citation_mode="aligned": the LLM answers with the plain templates, the answer's sentences are then cited."""

import asyncio

import pytest
from llama_index.core.prompts.chat_prompts import TEXT_QA_PROMPT_TMPL_MSGS, TEXT_QA_SYSTEM_PROMPT

from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.prompts.synthesis import LANGUAGE_RULE
from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.synthesizers.citations import CITATION_MODES
from llama_index_convrag.synthesizers.grounding import cite_sentences
from llama_index_convrag.testing import ScriptedLLM

from tests.synthesizers.conftest import make_nodes, qa

TEXTS = ["The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
         "Green tea should steep for two minutes in water at eighty degrees."]
ANSWER = "Tea steeps for two minutes. The tower was completed in 1889! Napoleon painted it."
CITED = "Tea steeps for two minutes [2]. The tower was completed in 1889 [1]! Napoleon painted it."


def aligned(llm, **kw):
    return get_response_synthesizer(llm=llm, citations=True, citation_mode="aligned", **kw)


def test_the_prompt_is_cores_qa_prompt_with_the_language_rule_no_citation_instruction_unnumbered_passages():
    llm = ScriptedLLM.fixed(ANSWER)
    nodes = make_nodes(TEXTS)
    response = aligned(llm).synthesize("q?", nodes)
    plain = ScriptedLLM.fixed(ANSWER)
    get_response_synthesizer(llm=plain).synthesize("q?", nodes)
    assert plain.prompts == [qa("\n\n".join(TEXTS))]  # without citations: core's QA prompt, unchanged
    with_rule = qa("\n\n".join(TEXTS)).replace("answer the query.\n", f"answer the query. {LANGUAGE_RULE}\n")
    assert llm.prompts == [with_rule] and with_rule != plain.prompts[0]  # one call
    assert str(response) == CITED
    assert response.metadata["citations"] == [{"marker": 2, "node_id": "n1", "source_index": 1},
                                              {"marker": 1, "node_id": "n0", "source_index": 0}]
    assert response.metadata["invalid_citation_markers"] == []
    assert response.metadata["llm_calls"] == 1


def test_a_chat_model_gets_cores_qa_messages_with_the_rule_as_the_system_prompts_third():
    llm = ScriptedLLM.fixed(ANSWER, chat_model=True)
    aligned(llm).synthesize("q?", make_nodes(TEXTS))
    system, user = llm.calls[0].messages
    assert system.content == (TEXT_QA_SYSTEM_PROMPT.content + "\n3. Always answer in the language the query is "
                                                              "written in.")
    assert user.content == TEXT_QA_PROMPT_TMPL_MSGS[1].content.format(context_str="\n\n".join(TEXTS), query_str="q?")


@pytest.mark.parametrize("mode,calls", [("refine", [True, False]), ("accumulate", [True, True]),
                                        ("simple_summarize", [True])])
def test_the_qa_prompt_has_the_rule_and_refine_and_tree_summarize_keep_cores_prompts(mode, calls):
    llm = ScriptedLLM.fixed(ANSWER)
    aligned(llm, response_mode=mode).synthesize("q?", make_nodes(TEXTS))
    assert [LANGUAGE_RULE in p for p in llm.prompts] == calls, llm.prompts  # refine's second call: core's refine
    tree = ScriptedLLM.fixed(ANSWER)
    aligned(tree, response_mode="tree_summarize").synthesize("q?", make_nodes(TEXTS))
    assert tree.prompts and not any(LANGUAGE_RULE in p for p in tree.prompts)  # not measured: core's prompt


@pytest.mark.parametrize("mode", ["refine", "tree_summarize", "simple_summarize"])
def test_every_llm_mode_cites_its_answer_by_alignment(mode):
    response = aligned(ScriptedLLM.fixed(ANSWER), response_mode=mode).synthesize("q?", make_nodes(TEXTS))
    assert str(response).startswith(CITED)
    assert [c["marker"] for c in response.metadata["citations"]] == [2, 1]


def test_stream_and_non_stream_agree_and_the_stream_carries_the_markers():
    nodes = make_nodes(TEXTS)
    whole = aligned(ScriptedLLM.fixed(ANSWER)).synthesize("q?", nodes)
    streamed = aligned(ScriptedLLM.fixed(ANSWER), streaming=True).synthesize("q?", nodes)
    deltas = list(streamed.response_gen)
    assert "".join(deltas) == str(whole) == CITED
    # the first words wait while the answer could still be a short one (synthesizers/completion.py: five words, one
    # clause); then words flow as they come, and a sentence's end punctuation waits for its marker (known once the
    # next one began)
    assert deltas == ["Tea steeps for two minutes [2]. The", " tower", " was", " completed", " in",
                      " 1889", " [1]! Napoleon", " painted", " it", "."]
    assert streamed.metadata["citations"] == whole.metadata["citations"]


def test_async_stream_agrees():
    nodes = make_nodes(TEXTS)

    async def run():
        response = await aligned(ScriptedLLM.fixed(ANSWER), streaming=True).asynthesize("q?", nodes)
        return [d async for d in response.async_response_gen()], response

    deltas, response = asyncio.run(run())
    assert "".join(deltas) == CITED
    assert [c["marker"] for c in response.metadata["citations"]] == [2, 1]


def test_layout_is_kept_and_chinese_is_cited_before_its_full_stop():
    answer = "In short:\n- The tower was completed in 1889.\n- Tea steeps for two minutes."
    assert cite_sentences(answer, TEXTS) == (
        "In short:\n- The tower was completed in 1889 [1].\n- Tea steeps for two minutes [2].")


def test_inline_stays_the_factory_default_and_aligned_needs_citations_to_cite():
    llm = ScriptedLLM.fixed(ANSWER)
    assert get_response_synthesizer(llm=llm).citation_mode is None
    assert get_response_synthesizer(llm=llm, citations=True).citation_mode == "inline"
    assert aligned(llm).citation_mode == "aligned"
    uncited = get_response_synthesizer(llm=llm, citation_mode="aligned").synthesize("q?", make_nodes(TEXTS))
    assert str(uncited) == ANSWER and "citations" not in uncited.metadata


def test_a_mode_without_an_llm_call_writes_its_own_markers(embed_model):
    extractive = get_response_synthesizer(response_mode="extractive", citations=True, citation_mode="aligned",
                                          embed_model=embed_model)
    assert extractive.citation_mode == "inline"


@pytest.mark.parametrize("bad", ["after", "ALIGNED", None, True])
def test_a_bad_citation_mode_names_the_value_and_the_accepted_ones(bad):
    with pytest.raises(ConfigurationError) as err:
        get_response_synthesizer(llm=ScriptedLLM.fixed("x"), citations=True, citation_mode=bad)
    assert str(err.value) == f"citation_mode must be one of {list(CITATION_MODES)}, got {bad!r}"
    assert CITATION_MODES == ("inline", "aligned")
