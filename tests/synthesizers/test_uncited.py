"""without_citations: the twin of a citing synthesizer that answers without the citation instruction."""

from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_REFINE_PROMPT_SEL

from llama_index_convrag.prompts.synthesis import ALIGNED_QA_PROMPT_SEL, CITATION_QA_PROMPT
from llama_index_convrag.synthesizers import Extractive, get_response_synthesizer
from llama_index_convrag.synthesizers.uncited import without_citations
from llama_index_convrag.testing import ScriptedLLM


def test_the_twin_asks_as_aligned_does_with_unnumbered_chunks_and_does_not_stream(three_nodes):
    llm = ScriptedLLM.fixed("Alpha.")
    cited = get_response_synthesizer(llm=llm, citations=True, streaming=True)
    twin = without_citations(cited)
    assert twin._get_prompts()["text_qa_template"] is ALIGNED_QA_PROMPT_SEL
    assert twin._get_prompts()["refine_template"] is DEFAULT_REFINE_PROMPT_SEL  # the plain default: core's
    assert cited._get_prompts()["text_qa_template"] is CITATION_QA_PROMPT  # the original is unchanged
    response = twin.synthesize("q?", three_nodes)
    assert str(response) == "Alpha." and "citations" not in response.metadata
    aligned = get_response_synthesizer(llm=ScriptedLLM.fixed("x"), citations=True, citation_mode="aligned")
    aligned.synthesize("q?", three_nodes)
    assert llm.prompts == [aligned._llm.prompts[0]]  # the same prompt as the aligned mode's


def test_a_template_the_caller_gave_is_kept(three_nodes):
    mine = PromptTemplate("Sources:\n{context_str}\nQ: {query_str}\nA: ")
    twin = without_citations(get_response_synthesizer(llm=ScriptedLLM.fixed("x"), citations=True,
                                                      text_qa_template=mine))
    assert twin._get_prompts()["text_qa_template"] is mine


def test_nothing_to_retry_without_an_llm_mode(embed_model):
    assert without_citations(Extractive(embed_model)) is None
    assert without_citations(object()) is None
