"""The template method: extra variables, empty input, streaming (sync/async), citations, output_cls, ledger."""

import pytest
from llama_index.core.base.response.schema import AsyncStreamingResponse, PydanticResponse, StreamingResponse
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.prompts import PromptTemplate

from llama_index_convrag.prompts.synthesis import CITATION_QA_TMPL
from llama_index_convrag.synthesizers import get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

from .conftest import make_nodes, qa, tokens

TONE_QA = PromptTemplate("Tone: {tone_name}\n{context_str}\nQ: {query_str}\nA: ")


def test_missing_extra_variable_raises_naming_it_before_any_call(three_nodes):
    llm = ScriptedLLM.echo()
    synth = get_response_synthesizer(llm=llm, text_qa_template=TONE_QA)
    with pytest.raises(ValueError, match=r"template 'text_qa_template' needs variable\(s\) \['tone_name'\]"):
        synth.synthesize("q?", three_nodes)
    with pytest.raises(ValueError, match="tone_name"):
        synth.get_response("q?", ["chunk"])
    with pytest.raises(ValueError, match="tone_name"):
        synth.synthesize("q?", [])  # checked even when retrieval found nothing
    assert llm.call_count == 0


async def test_extra_variables_fill_the_prompt_sync_and_async(three_nodes):
    llm = ScriptedLLM.fixed("A")
    synth = get_response_synthesizer(llm=llm, text_qa_template=TONE_QA)
    synth.synthesize("q?", three_nodes, tone_name="warm")
    await synth.asynthesize("q?", three_nodes, tone_name="dry")
    context = "alpha fact\n\nbeta fact\n\ngamma fact"
    assert llm.prompts == [f"Tone: warm\n{context}\nQ: q?\nA: ", f"Tone: dry\n{context}\nQ: q?\nA: "]
    assert synth.get_response("q?", ["x"], tone_name="calm") == "A"


def test_unused_and_clashing_extras(three_nodes):
    synth = get_response_synthesizer(llm=ScriptedLLM.fixed("A"))
    assert synth.synthesize("q?", three_nodes, chat_history="h").metadata["unused_variables"] == ["chat_history"]
    with pytest.raises(ValueError, match=r"extra variables \['context_str'\] are filled by the synthesizer"):
        synth.synthesize("q?", three_nodes, context_str="x")


async def test_empty_nodes_give_the_configured_empty_response():
    llm = ScriptedLLM.echo()
    synth = get_response_synthesizer(llm=llm, empty_response="Nothing found.")
    response = synth.synthesize("q?", [])
    assert response.response == "Nothing found." and response.metadata["llm_calls"] == 0
    streaming = get_response_synthesizer(llm=llm, streaming=True, empty_response="Nothing found.")
    assert streaming.synthesize("q?", []).get_response().response == "Nothing found."
    agen = await streaming.asynthesize("q?", [])
    assert isinstance(agen, AsyncStreamingResponse)
    assert [d async for d in agen.async_response_gen()] == ["Nothing found."]
    assert llm.call_count == 0


def test_all_blank_chunks_make_no_call():
    llm = ScriptedLLM.echo()
    response = get_response_synthesizer(llm=llm).synthesize("q?", make_nodes(["  ", ""]))
    assert response.response == "Empty Response" and llm.call_count == 0


def test_sync_streaming_hands_on_only_the_last_refine_call(three_nodes):
    """As core: every refine call streams; the intermediate answers are collected (they feed the next prompt) and
    only the last stream reaches the reader."""
    llm = ScriptedLLM.cycle(["A1", "A2", "final answer here"])
    response = get_response_synthesizer(llm=llm, response_mode="refine", streaming=True).synthesize("q?", three_nodes)
    assert isinstance(response, StreamingResponse)
    assert [n.node.node_id for n in response.source_nodes] == ["n0", "n1", "n2"]
    assert list(response.response_gen) == ["final ", "answer ", "here"]
    assert [c.kind for c in llm.calls] == ["stream_complete"] * 3
    assert "A2" in llm.prompts[2]  # the collected intermediate answer fed the last refine prompt
    assert response.metadata["llm_calls"] == 3


async def test_async_streaming_carries_source_nodes(three_nodes):
    llm = ScriptedLLM.fixed("streamed reply")
    response = await get_response_synthesizer(llm=llm, streaming=True).asynthesize("q?", three_nodes)
    assert isinstance(response, AsyncStreamingResponse)
    assert [n.node.node_id for n in response.source_nodes] == ["n0", "n1", "n2"]
    assert [d async for d in response.async_response_gen()] == ["streamed ", "reply"]
    assert llm.prompts == [qa("alpha fact\n\nbeta fact\n\ngamma fact")]


def test_citations_number_chunks_and_map_markers(three_nodes):
    llm = ScriptedLLM.fixed("Alpha holds [1], and gamma too [3][1].")
    response = get_response_synthesizer(llm=llm, citations=True).synthesize("q?", three_nodes)
    context = "[1] alpha fact\n\n[2] beta fact\n\n[3] gamma fact"
    assert llm.prompts == [CITATION_QA_TMPL.format(context_str=context, query_str="q?")]
    assert response.metadata["citations"] == [
        {"marker": 1, "node_id": "n0", "source_index": 0},
        {"marker": 3, "node_id": "n2", "source_index": 2},
    ]


async def test_streaming_citations_are_filled_when_the_stream_ends(three_nodes):
    llm = ScriptedLLM.fixed("Beta [2].")
    synth = get_response_synthesizer(llm=llm, citations=True, streaming=True)
    response = synth.synthesize("q?", three_nodes)
    assert response.metadata["citations"] == []
    assert "".join(response.response_gen) == "Beta [2]."
    assert response.metadata["citations"] == [{"marker": 2, "node_id": "n1", "source_index": 1}]
    aresponse = await synth.asynthesize("q?", three_nodes)
    assert "".join([d async for d in aresponse.async_response_gen()]) == "Beta [2]."
    assert aresponse.metadata["citations"][0]["node_id"] == "n1"


async def test_invented_citation_markers_are_listed_in_metadata(three_nodes):
    """Markers past the sources given are dropped from citations but listed."""
    llm = ScriptedLLM.fixed("Alpha [1] and more [5].")
    response = get_response_synthesizer(llm=llm, citations=True).synthesize("q?", three_nodes)
    assert (response.metadata["citations"], response.metadata["invalid_citation_markers"]) == (
        [{"marker": 1, "node_id": "n0", "source_index": 0}], [5])
    stream = get_response_synthesizer(llm=llm, citations=True, streaming=True).synthesize("q?", three_nodes)
    assert stream.metadata["invalid_citation_markers"] == []
    assert "".join(stream.response_gen) == "Alpha [1] and more [5]."
    assert stream.metadata["invalid_citation_markers"] == [5]
    astream = await get_response_synthesizer(llm=llm, citations=True, streaming=True).asynthesize("q?", three_nodes)
    assert "".join([d async for d in astream.async_response_gen()]) == "Alpha [1] and more [5]."
    assert astream.metadata["invalid_citation_markers"] == [5]


class Verdict(BaseModel):
    answer: str
    confident: bool


def test_output_cls_gives_a_pydantic_response(three_nodes):
    llm = ScriptedLLM.fixed('{"answer": "yes", "confident": true}')
    response = get_response_synthesizer(llm=llm, output_cls=Verdict).synthesize("q?", three_nodes)
    assert isinstance(response, PydanticResponse)
    assert response.response == Verdict(answer="yes", confident=True)
    # as core: streaming with output_cls gives the structured answer (nothing to stream)
    streamed = get_response_synthesizer(llm=llm, output_cls=Verdict, streaming=True).synthesize("q?", three_nodes)
    assert isinstance(streamed, PydanticResponse)
    assert streamed.response == Verdict(answer="yes", confident=True)


def test_prompt_tokens_sum_every_prompt(three_nodes):
    llm = ScriptedLLM.cycle(["a", "b", "c"])
    response = get_response_synthesizer(llm=llm, response_mode="accumulate").synthesize("q?", three_nodes)
    assert response.metadata["prompt_tokens"] == sum(tokens(p) for p in llm.prompts) > 0


def test_prompts_are_exposed_and_updatable(three_nodes):
    llm = ScriptedLLM.echo()
    synth = get_response_synthesizer(llm=llm)
    assert sorted(synth.get_prompts()) == [  # core's names, the multimodal twins included
        "chat_content_qa_template", "chat_content_refine_template", "refine_template", "text_qa_template"
    ]
    synth.update_prompts({"text_qa_template": PromptTemplate("{context_str}|{query_str}")})
    synth.synthesize("q?", three_nodes)
    assert llm.prompts == ["alpha fact\n\nbeta fact\n\ngamma fact|q?"]


def test_every_llm_call_emits_an_instrumentation_event(three_nodes):
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    from llama_index_convrag.synthesizers import SynthesisLLMCallEvent

    seen = []

    class Collect(BaseEventHandler):
        def handle(self, event, **kwargs):
            if isinstance(event, SynthesisLLMCallEvent):
                seen.append((event.mode, event.call_index, event.prompt_tokens))

    root = get_dispatcher()
    handler = Collect()
    root.add_event_handler(handler)
    try:
        llm = ScriptedLLM.cycle(["a", "b", "c"])
        get_response_synthesizer(llm=llm, response_mode="refine").synthesize("q?", three_nodes)
    finally:
        root.event_handlers.remove(handler)
    assert seen == [("refine", i, tokens(p)) for i, p in enumerate(llm.prompts)]


async def test_streaming_over_http_sync_and_async(openai_server, three_nodes):
    from llama_index_convrag.config import resolve_llm

    openai_server.chat_responder = lambda body: {"content": "Alpha [1] holds."}
    llm = resolve_llm(base_url=openai_server.base_url, model="x", env={})
    synth = get_response_synthesizer(llm=llm, streaming=True, citations=True)
    response = synth.synthesize("q?", three_nodes)
    assert "".join(response.response_gen) == "Alpha [1] holds."
    aresponse = await synth.asynthesize("q?", three_nodes)
    assert "".join([d async for d in aresponse.async_response_gen()]) == "Alpha [1] holds."
    assert [n.node.node_id for n in aresponse.source_nodes] == ["n0", "n1", "n2"]
    assert aresponse.metadata["citations"] == [{"marker": 1, "node_id": "n0", "source_index": 0}]
    assert [r.body["stream"] for r in openai_server.requests] == [True, True]


def test_output_cls_never_mutates_core_shared_default_prompts(three_nodes):
    """Issue 11 bug 1: structured_predict attached a JSON output parser to DEFAULT_TEXT_QA_PROMPT (and the selectors)
    for the whole process; afterwards any streaming synthesis, core's own included, raised."""
    from llama_index.core.llms import MockLLM
    from llama_index.core.prompts.default_prompt_selectors import (
        DEFAULT_REFINE_PROMPT_SEL,
        DEFAULT_TEXT_QA_PROMPT_SEL,
        DEFAULT_TREE_SUMMARIZE_PROMPT_SEL,
    )
    from llama_index.core.response_synthesizers import get_response_synthesizer as core_factory

    shared = [DEFAULT_TEXT_QA_PROMPT_SEL, DEFAULT_REFINE_PROMPT_SEL, DEFAULT_TREE_SUMMARIZE_PROMPT_SEL]
    variants = [t for sel in shared for t in [sel.default_template, *(c for _, c in sel.conditionals or [])]]
    for mode in ("compact", "refine", "tree_summarize", "simple_summarize", "accumulate"):
        # a text-completion LLM: structured_predict then builds a program that sets output_parser on its prompt
        llm = ScriptedLLM.fixed('{"answer": "yes", "confident": true}', function_calling=False)
        synth = get_response_synthesizer(llm=llm, response_mode=mode, output_cls=Verdict)
        answer = synth.synthesize("q?", three_nodes).response
        if mode == "accumulate":  # joins one structured answer per chunk, as core
            assert answer.startswith('Response 1: {"answer":"yes","confident":true}'), answer
        else:
            assert answer == Verdict(answer="yes", confident=True), mode
    assert [t.output_parser for t in variants] == [None] * len(variants)
    stream = core_factory(llm=MockLLM(), streaming=True).synthesize("q?", three_nodes)
    assert "".join(stream.response_gen)  # core's streaming still works in this process


def test_every_mode_accepts_multimodal_and_chat_prompt_helper():
    """Issue 11 bug 5: every class rejected multimodal= (even False) and chat_prompt_helper=."""
    from llama_index.core.indices.prompt_helper import ChatPromptHelper

    from llama_index_convrag.synthesizers import registered_modes
    from llama_index_convrag.synthesizers.registry import lookup_mode

    helper = ChatPromptHelper(context_window=999)
    for mode in registered_modes():
        cls = lookup_mode(mode)
        llm = ScriptedLLM.echo(chat_model=True) if cls.requires_llm else None
        synth = get_response_synthesizer(llm=llm, response_mode=mode, multimodal=False, chat_prompt_helper=helper)
        assert synth._multimodal is False and synth._chat_prompt_helper is helper, mode
    with pytest.raises(ValueError, match="Multimodal synthesis requires a chat LLM."):
        get_response_synthesizer(llm=ScriptedLLM.echo(), multimodal=True)
