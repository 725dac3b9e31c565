"""Every response mode, core's class against ours on generated inputs: the same answer, the same LLM calls (kind,
prompt, messages) in the same order, the same source nodes and response type.

Each property states the inputs on which the two are claimed equal; what differs on purpose outside them is
asserted in ``test_synthesizer_divergences.py`` (one test per row of docs/COMPATIBILITY.md).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict

import llama_index.core.response_synthesizers as core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.prompt_type import PromptType
from llama_index.core.types import BasePydanticProgram

import llama_index_convrag.synthesizers as ours
from llama_index_convrag.testing import ScriptedLLM
from tests.differential.harness import (CORE_STREAMS_TOKENS, CORE_VERSION, DIFFERENTIAL, EXAMPLES, digest, nodes_of, queries, recording_llm, run_synthesizer,
                                        settings_llm, texts)

FITTING_MODES = ("refine", "compact", "tree_summarize", "accumulate", "compact_accumulate", "generation", "no_text",
                 "context_only")
"""Modes whose every call is compared on context that fits one window (``simple_summarize``: see the divergences)."""
ACCUMULATING = ("accumulate", "compact_accumulate")
UNSTREAMED = ACCUMULATING + ("no_text", "context_only")
"""Modes with no LLM answer to stream: ``streaming=True`` streams their text here (core raises or returns a plain
``Response``; a divergence)."""
STRUCTURED = ("refine", "compact")
"""The modes core gives structured answer filtering."""


def both(build: Any, llm_kw: Dict[str, Any], query: str, contents: Any, *, same_kind: bool = True, **kw: Any) -> None:
    """Run core's and our synthesizer (``build(module, llm)``) on the same input; assert the runs are equal (the
    response types too, unless ``same_kind`` is False)."""
    nodes = nodes_of(contents)
    def build_core(llm: Any) -> Any:
        with settings_llm(llm):
            return build(core, llm)

    theirs = run_synthesizer(build_core, llm_kw, query, nodes, **kw)
    mine = run_synthesizer(lambda llm: build(ours, llm), llm_kw, query, nodes, **kw)
    assert mine.calls == theirs.calls
    assert mine.answer == theirs.answer
    assert mine.sources == theirs.sources
    if same_kind:
        assert mine.kind == theirs.kind
    if same_kind and CORE_STREAMS_TOKENS:
        assert mine.deltas == theirs.deltas


@pytest.mark.parametrize("mode", FITTING_MODES)
@DIFFERENTIAL
@given(data=st.data(), contents=st.lists(texts, max_size=6), query=queries, chat=st.booleans(),
       use_async=st.booleans())
def test_every_mode_on_context_that_fits_one_window(mode, data, contents, query, chat, use_async):
    """Sync or async, streamed or not, calls in parallel or not (the factory's ``use_async``)."""
    streaming = data.draw(st.booleans(), "streaming") if mode not in UNSTREAMED else False
    parallel = data.draw(st.booleans(), "factory use_async")
    window = data.draw(st.integers(2048, 8192), "context_window")
    num_output = data.draw(st.integers(32, 512), "num_output")
    both(lambda m, llm: m.get_response_synthesizer(llm=llm, response_mode=mode, streaming=streaming,
                                                   use_async=parallel),
         dict(chat=chat, context_window=window, num_output=num_output), query, contents, use_async=use_async)


@DIFFERENTIAL
@given(contents=st.lists(texts, min_size=1, max_size=5), query=queries, separator=st.sampled_from(
    [" | ", "\n", "\n---\n", "；"]), use_async=st.booleans())
def test_accumulate_joins_answers_with_the_separator_given_per_call(contents, query, separator, use_async):
    both(lambda m, llm: m.get_response_synthesizer(llm=llm, response_mode="accumulate"), {}, query, contents,
         use_async=use_async, separator=separator)


@pytest.mark.parametrize("mode", ("compact", "compact_accumulate"))
@DIFFERENTIAL
@given(data=st.data(), contents=st.lists(texts, min_size=1, max_size=8), query=queries, chat=st.booleans(),
       use_async=st.booleans())
def test_compact_modes_pack_windows_as_core_on_small_windows(mode, data, contents, query, chat, use_async):
    """Windows of 330-600 tokens split the context into several calls. Compact keeps room for the existing answer:
    equal whenever that room (``response_padding_size``) is within the LLM's ``num_output`` and fits the answers."""
    num_output = data.draw(st.integers(40, 120), "num_output")
    window = data.draw(st.integers(330, 600), "context_window")
    streaming = data.draw(st.booleans(), "streaming") if mode == "compact" else False
    if mode == "compact":
        padding = data.draw(st.integers(24, num_output), "response_padding_size")
        build = lambda m, llm: m.CompactAndRefine(llm=llm, streaming=streaming, response_padding_size=padding)  # noqa: E731
    else:
        build = lambda m, llm: compact_accumulate(m)(llm=llm)  # noqa: E731
    both(build, dict(chat=chat, context_window=window, num_output=num_output), query, contents, use_async=use_async)


@pytest.mark.parametrize("mode", STRUCTURED)
@DIFFERENTIAL
@given(data=st.data(), contents=st.lists(st.one_of(texts, st.just("<image>")), min_size=1, max_size=5),
       query=queries, chat=st.booleans(), function_calling=st.booleans(), use_async=st.booleans(),
       streaming=st.booleans())
def test_structured_answer_filtering(mode, data, contents, query, chat, function_calling, use_async, streaming):
    """Every call asks for ``{answer, query_satisfied}`` (a tool call, or JSON after the schema in the prompt); the
    answers the context does not satisfy are dropped, in core's order. Image nodes: multimodal (a chat LLM).
    Streamed, the response type differs (a divergence: ``test_structured_streaming_answers_come_whole``)."""
    multimodal = "<image>" in contents
    chat = chat or multimodal
    both(lambda m, llm: factory(m, llm, mode, structured_answer_filtering=True, streaming=streaming,
                                multimodal=multimodal),
         dict(chat=chat, function_calling=function_calling), query, contents, use_async=use_async,
         same_kind=not streaming)


class FailingProgram(BasePydanticProgram):
    """A structured-output program whose every call fails as a parser does (``ValueError`` / ``TypeError``)."""

    def __init__(self, error: Exception) -> None:
        self._error = error

    @property
    def output_cls(self) -> Any:
        return ours.StructuredRefineResponse

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._error

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        raise self._error


@pytest.mark.parametrize("error", [ValueError("no tool call in the reply"), TypeError("expected a model, got str")])
@pytest.mark.parametrize("use_async", [False, True])
def test_failing_structured_programs_leave_the_empty_response(error, use_async):
    both(lambda m, llm: m.get_response_synthesizer(llm=llm, response_mode="refine", structured_answer_filtering=True,
                                                   program_factory=lambda _: FailingProgram(error)),
         {}, "q?", ["the bridge", "the river"], use_async=use_async)


class Fact(BaseModel):
    """What a structured answer holds."""

    subject: str
    year: int


def fact_llm(**kw: Any) -> Any:
    def tool(prompt: str, tools: Any) -> Dict[str, Any]:
        return {"name": tools[0].metadata.name, "args": {"subject": f"s{digest(prompt) % 97}", "year": 1932}}

    return ScriptedLLM(mode="fn", fn=lambda p: json.dumps({"subject": f"s{digest(p) % 97}", "year": 1932}),
                       tool_fn=tool, **kw)


def structured_run(module: Any, mode: str, contents: Any, query: str, function_calling: bool,
                   use_async: bool) -> Any:
    """``(response type, response, calls)`` of ``mode`` with ``output_cls=Fact``."""
    llm = fact_llm(function_calling=function_calling)
    with settings_llm(llm if module is core else None):
        synth = module.get_response_synthesizer(llm=llm, response_mode=mode, output_cls=Fact)
    nodes = nodes_of(contents)
    response = synth.synthesize(query, nodes) if not use_async else asyncio.run(synth.asynthesize(query, nodes))
    return type(response).__name__, response.response, len(llm.calls)


@pytest.mark.parametrize("mode", ("refine", "compact", "tree_summarize"))
@DIFFERENTIAL
@given(contents=st.lists(texts, min_size=1, max_size=4), query=queries, function_calling=st.booleans(),
       use_async=st.booleans())
def test_output_cls_answers_are_parsed_into_the_model(mode, contents, query, function_calling, use_async):
    """``output_cls``: a tool call (function-calling LLM) or a JSON reply (text completion) parsed into the model
    (``simple_summarize`` and ``accumulate`` differ: ``test_output_cls_in_simple_summarize_and_accumulate``)."""
    assert (structured_run(core, mode, contents, query, function_calling, use_async)
            == structured_run(ours, mode, contents, query, function_calling, use_async))


MODE_CLASSES = {"refine": "Refine", "compact": "CompactAndRefine", "tree_summarize": "TreeSummarize",
                "simple_summarize": "SimpleSummarize", "accumulate": "Accumulate"}


def factory(module: Any, llm: Any, response_mode: str, **kw: Any) -> Any:
    """``module``'s synthesizer for ``response_mode``; for core with ``multimodal`` its class (core 0.14.22's factory
    has no ``multimodal`` argument; its classes do)."""
    if not kw.get("multimodal", True):
        del kw["multimodal"]
    if module is core and kw.get("multimodal"):
        cls = compact_accumulate(core) if response_mode == "compact_accumulate" else getattr(
            core, MODE_CLASSES[response_mode])
        return cls(llm=llm, **kw)
    return module.get_response_synthesizer(llm=llm, response_mode=response_mode, **kw)


def compact_accumulate(module: Any) -> Any:
    """``CompactAndAccumulate``: core exports it from its module only."""
    if module is core:
        from llama_index.core.response_synthesizers.compact_and_accumulate import CompactAndAccumulate

        return CompactAndAccumulate
    return module.CompactAndAccumulate


TONE_QA = PromptTemplate("Answer in a {tone} tone.\n{context_str}\nQ: {query_str}\nA: ",
                         prompt_type=PromptType.QUESTION_ANSWER)
TONE_REFINE = PromptTemplate("In a {tone} tone, improve '{existing_answer}' for {query_str} with:\n{context_msg}\n",
                             prompt_type=PromptType.REFINE)
TONE_SUMMARY = PromptTemplate("Summarise in a {tone} tone for {query_str}:\n{context_str}\n",
                              prompt_type=PromptType.SUMMARY)


@pytest.mark.parametrize("mode", ("refine", "compact", "tree_summarize", "accumulate", "compact_accumulate"))
@DIFFERENTIAL
@given(contents=st.lists(texts, min_size=1, max_size=5), query=queries, tone=texts, chat=st.booleans(),
       use_async=st.booleans())
def test_extra_template_variables_reach_every_prompt(mode, contents, query, tone, chat, use_async):
    templates = dict(summary_template=TONE_SUMMARY) if mode == "tree_summarize" else dict(
        text_qa_template=TONE_QA, **({"refine_template": TONE_REFINE} if mode in STRUCTURED else {}))
    both(lambda m, llm: m.get_response_synthesizer(llm=llm, response_mode=mode, **templates),
         dict(chat=chat), query, contents, use_async=use_async, tone=tone)


@DIFFERENTIAL
@given(mode=st.sampled_from(FITTING_MODES + ("simple_summarize",)), query=queries, chat=st.booleans(),
       use_async=st.booleans(), streaming=st.booleans())
def test_no_nodes_gives_the_empty_response_without_a_call(mode, query, chat, use_async, streaming):
    streaming = streaming and mode not in UNSTREAMED
    both(lambda m, llm: m.get_response_synthesizer(llm=llm, response_mode=mode, streaming=streaming),
         dict(chat=chat), query, [], use_async=use_async)


@pytest.mark.parametrize("mode", ("refine", "compact", "tree_summarize", "simple_summarize", "compact_accumulate",
                                  "accumulate"))
@settings(DIFFERENTIAL, max_examples=EXAMPLES // 2)  # images make every call slow to count
@given(contents=st.lists(st.one_of(texts, st.just("<image>")), min_size=1, max_size=4), query=queries,
       use_async=st.booleans(), streaming=st.booleans())
def test_multimodal_nodes_become_message_blocks(mode, contents, query, use_async, streaming):
    """Text and image nodes as content blocks of the chat messages (``chat_content_*`` templates)."""
    if CORE_VERSION <= (0, 14, 22) and mode in ("tree_summarize", "accumulate", "compact_accumulate"):
        pytest.skip("core 0.14.22 has no multimodal in this mode (row multimodal-tree-accumulate)")
    streaming = streaming and mode not in UNSTREAMED
    both(lambda m, llm: factory(m, llm, mode, multimodal=True, streaming=streaming),
         dict(chat=True), query, contents, use_async=use_async)


MULTIMODAL_KEYS_LATER = {"TreeSummarize": "chat_summary_template", "Accumulate": "chat_content_qa_template",
                         "CompactAndAccumulate": "chat_content_qa_template"}
"""The message-content prompt key core 0.14.22 does not show for these classes (0.14.25 and ours do)."""

CLASSES = ("Refine", "CompactAndRefine", "TreeSummarize", "SimpleSummarize", "Accumulate", "CompactAndAccumulate",
           "Generation", "NoText", "ContextOnly")


@pytest.mark.parametrize("name", CLASSES)
def test_each_class_has_cores_prompt_keys_and_replaces_them(name):
    from llama_index.core.response_synthesizers import compact_and_accumulate, context_only, no_text

    core_cls = getattr(core, name, None) or next(getattr(m, name) for m in (compact_and_accumulate, context_only,
                                                                             no_text) if hasattr(m, name))
    llm = recording_llm()
    with settings_llm(llm):
        theirs = core_cls(llm=llm)
    mine = getattr(ours, name)(llm=llm)
    if CORE_VERSION <= (0, 14, 22) and name in MULTIMODAL_KEYS_LATER:  # row multimodal-tree-accumulate
        assert sorted(mine.get_prompts()) == sorted([*theirs.get_prompts(), MULTIMODAL_KEYS_LATER[name]])
    else:
        assert sorted(mine.get_prompts()) == sorted(theirs.get_prompts())
    replacement = PromptTemplate("{context_str} :: {query_str}")
    for synth in (theirs, mine):
        for key in list(synth.get_prompts()):
            synth.update_prompts({key: replacement})
            assert synth.get_prompts()[key].get_template() == replacement.get_template()
        synth.update_prompts({"not_a_prompt": replacement})  # unknown keys are ignored
    if name == "Accumulate":
        assert mine.flatten_list([[1, 2], [3], []]) == theirs.flatten_list([[1, 2], [3], []]) == [1, 2, 3]
