from llama_index.core.prompts import PromptTemplate

from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM


def test_one_call_with_the_query_only(three_nodes):
    llm = ScriptedLLM.fixed("G")
    response = get_response_synthesizer(llm=llm, response_mode="generation").synthesize("q?", three_nodes)
    assert llm.prompts == ["q?"]
    assert response.response == "G" and response.metadata["llm_calls"] == 1


def test_extra_variables_fill_the_simple_template(three_nodes):
    llm = ScriptedLLM.echo()
    synth = get_response_synthesizer(
        llm=llm, response_mode="generation", simple_template=PromptTemplate("In a {tone_name} tone: {query_str}")
    )
    assert synth.synthesize("q?", three_nodes, tone_name="dry").response == "In a dry tone: q?"


async def test_answers_without_nodes_sync_async_and_streaming():
    """Issue 11 bug 2: Generation with nodes=[] returned "Empty Response" instead of answering the query."""
    llm = ScriptedLLM.echo()
    synth = get_response_synthesizer(llm=llm, response_mode="generation")
    assert synth.synthesize("what is 2+2?", []).response == "what is 2+2?"
    assert (await synth.asynthesize("hello?", [])).response == "hello?"
    streaming = get_response_synthesizer(llm=llm, response_mode="generation", streaming=True)
    assert "".join(streaming.synthesize("hi?", []).response_gen) == "hi?"
    assert llm.prompts == ["what is 2+2?", "hello?", "hi?"]
