"""Where our synthesizers differ from core's on purpose: one test per row of docs/COMPATIBILITY.md ("Response
synthesizers"), named by the row's id, asserting what core does and what we do on the same input.

A test here fails when the difference goes away (core changed, or we did): then the row is out of date.
"""

from __future__ import annotations

import asyncio
from typing import Any

import llama_index.core.response_synthesizers as core
import pytest
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.indices.prompt_helper import PromptHelper
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.prompt_type import PromptType
from llama_index.core.settings import Settings

import llama_index_convrag.synthesizers as ours
from llama_index_convrag.testing import ScriptedLLM
from tests.differential.harness import CORE_VERSION, divergence, nodes_of, read_answer, recording_llm, run_synthesizer, settings_llm

EN = "the bridge opened in 1932 and carries trains across the river to the old city"


def run(module: Any, llm_kw: Any, contents: Any, query: str = "when did the bridge open?", **factory: Any) -> Any:
    def build(llm: Any) -> Any:
        with settings_llm(llm if module is core else None):
            return module.get_response_synthesizer(llm=llm, **factory)

    return run_synthesizer(build, llm_kw, query, nodes_of(contents))


@divergence("no-settings-llm")
def test_no_llm_anywhere(monkeypatch):
    monkeypatch.setattr(Settings, "_llm", None)
    with pytest.raises(ValueError, match=r"OPENAI_API_KEY"):  # core's getter builds an OpenAI client
        core.get_response_synthesizer()
    with pytest.raises(ValueError, match=r"needs an LLM: pass llm=\.\.\. or assign llama_index\.core\.Settings\.llm"):
        ours.get_response_synthesizer()
    llm = recording_llm()
    monkeypatch.setattr(Settings, "_llm", llm)  # assigned: both use it
    assert ours.get_response_synthesizer()._llm is llm and core.get_response_synthesizer()._llm is llm


@divergence("unstreamed-modes-stream")
@pytest.mark.parametrize("mode", ["accumulate", "compact_accumulate", "no_text", "context_only"])
def test_streaming_modes_without_a_streamed_answer(mode):
    contents = [EN, "cats sleep at night"]
    mine = run(ours, {}, contents, response_mode=mode, streaming=True)
    assert mine.kind == "StreamingResponse"
    plain = run(ours, {}, contents, response_mode=mode)
    assert mine.answer == (plain.answer if mode != "no_text" else "") and mine.calls == plain.calls
    if mode in ("accumulate", "compact_accumulate"):
        with pytest.raises(ValueError, match="Unable to stream"):
            run(core, {}, contents, response_mode=mode, streaming=True)
    else:
        assert run(core, {}, contents, response_mode=mode, streaming=True).kind == "Response"


@divergence("structured-stream-whole")
def test_structured_streaming_answers_come_whole():
    """With ``structured_answer_filtering`` every reply is parsed whole; the answer is returned as a ``Response``.
    Core streams the last reply's answer when that reply was accepted, else returns a ``Response`` too."""
    contents = [EN, "cats sleep at night", "paris is the capital"]
    kw = dict(response_mode="refine", structured_answer_filtering=True, streaming=True)
    theirs, mine = run(core, {"function_calling": False}, contents, **kw), run(ours, {"function_calling": False},
                                                                             contents, **kw)
    assert (theirs.answer, theirs.calls) == (mine.answer, mine.calls)
    assert (theirs.kind, mine.kind) == ("StreamingResponse", "Response")


@divergence("compact-answer-room")
def test_compact_keeps_room_for_an_answer_within_num_output():
    contents = [EN * 4] * 20
    llm_kw = dict(context_window=1200, num_output=64)
    theirs, mine = run(core, llm_kw, contents, response_mode="compact"), run(ours, llm_kw, contents,
                                                                            response_mode="compact")
    assert len(mine.calls) < len(theirs.calls)  # core keeps 500 tokens for an answer written within 64
    same = dict(llm_kw, num_output=500)  # the room is the same once num_output reaches response_padding_size
    assert run(core, same, contents, response_mode="compact").calls == run(ours, same, contents,
                                                                           response_mode="compact").calls


TONE_QA = PromptTemplate("Style guide: {guide}\n{context_str}\nQ: {query_str}\nA: ",
                         prompt_type=PromptType.QUESTION_ANSWER)


@divergence("extra-variables-counted")
def test_extra_variables_count_in_the_window():
    llm_kw = dict(context_window=1000, num_output=100)
    guide = "keep every sentence short and plain " * 60  # about 420 tokens
    contents = [EN * 3] * 20
    def build_core(llm: Any) -> Any:
        with settings_llm(llm):
            return core.get_response_synthesizer(llm=llm, response_mode="compact_accumulate", text_qa_template=TONE_QA)

    theirs = run_synthesizer(build_core, llm_kw, "q?", nodes_of(contents), guide=guide)
    mine = run_synthesizer(lambda llm: ours.get_response_synthesizer(llm=llm, response_mode="compact_accumulate",
                                                                       text_qa_template=TONE_QA),
                           llm_kw, "q?", nodes_of(contents), guide=guide)
    tokens = ours.get_response_synthesizer(llm=ScriptedLLM.fixed("x")).count_tokens
    assert max(tokens(c[1]) for c in theirs.calls) > 1000 - 100  # core's prompts overflow the window
    assert max(tokens(c[1]) for c in mine.calls) <= 1000 - 100
    assert len(mine.calls) > len(theirs.calls)


@divergence("no-room-error")
def test_no_room_for_context_names_the_terms():
    llm_kw = dict(context_window=300, num_output=200)
    with pytest.raises(ValueError, match=r"Chunk size -\d+ is not positive"):
        run(core, llm_kw, [EN], response_mode="compact")
    with pytest.raises(ValueError, match=r"no room for context: context_window 300 - num_output 200"):
        run(ours, llm_kw, [EN], response_mode="compact")


@divergence("blank-chunks-no-call")
def test_chunks_that_are_all_blank():
    theirs, mine = run(core, {}, ["  ", "\n"], response_mode="compact"), run(ours, {}, ["  ", "\n"],
                                                                            response_mode="compact")
    assert len(theirs.calls) == 1 and "---------------------\n\n---------------------" in theirs.calls[0][1]
    assert (mine.calls, mine.answer) == ((), "Empty Response")


@divergence("answer-label-stripped")
@pytest.mark.parametrize("streaming", [False, True])
def test_a_reply_that_begins_with_the_answer_label(streaming):
    def build(module: Any, llm: Any) -> Any:
        return module.get_response_synthesizer(llm=llm, response_mode="refine", streaming=streaming)

    answers = []
    for module in (core, ours):
        llm = ScriptedLLM.fixed("Refined Answer: It opened in 1932.")
        answers.append(read_answer(build(module, llm).synthesize("q?", nodes_of([EN]))))
    assert answers == ["Refined Answer: It opened in 1932.", "It opened in 1932."]


@divergence("simple-summarize-context")
@pytest.mark.parametrize("streaming", [False, True])
def test_simple_summarize_context_is_plain_text(streaming):
    template = PromptTemplate("{context_str}", prompt_type=PromptType.QUESTION_ANSWER)
    kw = dict(response_mode="simple_summarize", text_qa_template=template, streaming=streaming)
    theirs, mine = run(core, {}, ["first part.", "second part."], **kw), run(ours, {}, ["first part.",
                                                                                      "second part."], **kw)
    assert theirs.calls[0][1] == "['first part.\\nsecond part.']"  # core 0.14.22-0.14.25 formats the list
    assert mine.calls[0][1] == "first part.\n\nsecond part."


@divergence("oversize-chunk-split")
def test_a_chunk_larger_than_the_window():
    """Refine: core splits every chunk up front keeping 500 tokens for the answer, with its splitter's overlap, and
    refines the pieces of a re-split in reverse order; ours splits a chunk only when it overflows the prompt it is
    sent in, at the token bound, in order."""
    llm_kw = dict(context_window=1200, num_output=100)
    contents = [EN * 40]  # about 650 tokens
    theirs, mine = run(core, llm_kw, contents, response_mode="refine"), run(ours, llm_kw, contents,
                                                                           response_mode="refine")
    assert (len(theirs.calls), len(mine.calls)) == (2, 1)
    tree_kw = dict(context_window=400, num_output=50)
    many = [EN * 4] * 8
    theirs_tree = run(core, tree_kw, many, response_mode="tree_summarize")
    mine_tree = run(ours, tree_kw, many, response_mode="tree_summarize")
    tokens = ours.get_response_synthesizer(llm=ScriptedLLM.fixed("x")).count_tokens
    first_level = lambda r: [context_of(c[1]) for c in r.calls[:-1]]  # noqa: E731
    total = tokens("\n\n".join(many))
    assert sum(tokens(w) for w in first_level(theirs_tree)) > total + 20  # core's windows overlap
    assert sum(tokens(w) for w in first_level(mine_tree)) <= total + 2 * len(first_level(mine_tree))


def context_of(prompt: str) -> str:
    """The context part of a default QA / summary prompt (between its two rules of dashes)."""
    return prompt.split("---------------------\n", 1)[1].rsplit("\n---------------------", 1)[0]


class Person(BaseModel):
    name: str
    age: int


def person_llm() -> ScriptedLLM:
    return ScriptedLLM(mode="fixed", responses=["-"], chat_model=True,
                       tool_fn=lambda prompt, tools: {"name": tools[0].metadata.name, "args": {"name": "Ann",
                                                                                               "age": 3}})


@divergence("output-cls-stream")
@pytest.mark.parametrize("chat", [False, True])
def test_output_cls_with_streaming(chat):
    llm = person_llm() if chat else ScriptedLLM.fixed('{"name": "Ann", "age": 3}')
    nodes = nodes_of([EN])
    with settings_llm(llm):
        theirs = core.get_response_synthesizer(llm=llm, output_cls=Person, streaming=True).synthesize("who?", nodes)
    mine = ours.get_response_synthesizer(llm=llm, output_cls=Person, streaming=True).synthesize("who?", nodes)
    assert (type(theirs).__name__, str(theirs)) == ("Response", "Empty Response")  # core loses the object
    assert (type(mine).__name__, mine.response) == ("PydanticResponse", Person(name="Ann", age=3))


@divergence("messages-need-multimodal")
def test_message_chunks_on_a_text_synthesizer():
    from llama_index.core.base.llms.types import ChatMessage

    chunk = [ChatMessage(role="user", content=EN)]
    llm = recording_llm(chat=True)
    with settings_llm(llm), pytest.raises(AttributeError, match=r"'ChatMessage' object has no attribute 'strip'"):
        core.get_response_synthesizer(llm=llm).get_response_from_messages("q?", chunk)
    synth = ours.get_response_synthesizer(llm=recording_llm(chat=True))
    with pytest.raises(NotImplementedError, match=r"get_response_from_messages needs a synthesizer built with "
                                                   r"multimodal=True"):
        synth.get_response_from_messages("q?", chunk)
    with pytest.raises(NotImplementedError, match=r"aget_response_from_messages needs"):
        asyncio.run(synth.aget_response_from_messages("q?", chunk))


@divergence("prompt-helper-from-llm")
def test_prompt_helpers_come_from_the_llm_given(monkeypatch):
    """Ours, like core from 0.14.23 on: the window of a synthesizer built with ``llm=`` comes from that LLM's metadata,
    an explicit helper wins, an assigned ``Settings.prompt_helper`` wins over the LLM. Core 0.14.22 sizes the chat prompt
    helper (multimodal calls) with ``Settings``' own (a 3900-token window when nothing is assigned)."""
    llm = recording_llm(context_window=12345, num_output=543, chat=True)
    windows = []
    for module in (core, ours):
        with settings_llm(None):
            synth = module.get_response_synthesizer(llm=llm)
            windows.append((synth._prompt_helper.context_window, synth._prompt_helper.num_output,
                            synth._chat_prompt_helper.context_window))
        helper = PromptHelper(context_window=9999, num_output=99)
        with settings_llm(llm if module is core else None):
            assert module.get_response_synthesizer(llm=llm, prompt_helper=helper)._prompt_helper is helper
    assert windows[1] == (12345, 543, 12345)
    assert windows[0] == ((12345, 543, 3900) if CORE_VERSION <= (0, 14, 22) else windows[1])
    monkeypatch.setattr(Settings, "_prompt_helper", PromptHelper(context_window=8888, num_output=88))
    assert [m.get_response_synthesizer(llm=llm)._prompt_helper.context_window for m in (core, ours)] == [8888, 8888]


@divergence("output-cls-simple-accumulate")
def test_output_cls_in_simple_summarize_and_accumulate():
    """``simple_summarize`` parses the reply into ``output_cls`` here (core returns the reply's text); ``accumulate``
    writes each parsed answer as JSON here (core writes the model's repr)."""
    from tests.differential.test_synthesizers import structured_run

    contents, query = [EN], "when?"
    kind, theirs, _ = structured_run(core, "simple_summarize", contents, query, False, False)
    assert kind == "Response" and theirs.startswith('{"subject"')
    kind, mine, _ = structured_run(ours, "simple_summarize", contents, query, False, False)
    assert kind == "PydanticResponse" and mine.year == 1932
    theirs = structured_run(core, "accumulate", contents, query, True, False)[1]
    mine = structured_run(ours, "accumulate", contents, query, True, False)[1]
    assert theirs.startswith("Response 1: subject=") and mine.startswith('Response 1: {"subject":')


@divergence("stream-deltas")
@pytest.mark.parametrize("mode", ["compact", "refine"])
def test_stream_deltas(mode):
    """The refine family: ours forwards the LLM's deltas, as core does from 0.14.23 on; core 0.14.22 hands the answer
    over whole (its other modes stream by delta in every version)."""
    theirs, mine = (run(m, {}, [EN, "cats sleep at night"], response_mode=mode, streaming=True) for m in (core, ours))
    assert theirs.answer == mine.answer and len(mine.deltas) > 1
    assert theirs.deltas == ((theirs.answer,) if CORE_VERSION <= (0, 14, 22) else mine.deltas)


@divergence("multimodal-tree-accumulate")
@pytest.mark.parametrize("mode", ["tree_summarize", "accumulate"])
def test_multimodal_tree_summarize_and_accumulate(mode):
    """Ours and core 0.14.25: ``TreeSummarize``, ``Accumulate`` and ``CompactAndAccumulate`` take ``multimodal=True``
    and show their message-content template as a prompt key; core 0.14.22's take neither."""
    from tests.differential.test_synthesizers import MODE_CLASSES, MULTIMODAL_KEYS_LATER

    name = MODE_CLASSES[mode]
    llm = recording_llm(chat=True)
    with settings_llm(llm):
        theirs = getattr(core, name)(llm=llm).get_prompts()
    mine = getattr(ours, name)(llm=llm).get_prompts()
    assert MULTIMODAL_KEYS_LATER[name] in mine and getattr(ours, name)(llm=llm, multimodal=True) is not None
    later = CORE_VERSION > (0, 14, 22)
    assert (MULTIMODAL_KEYS_LATER[name] in theirs) is later
    if not later:
        with settings_llm(llm), pytest.raises(TypeError, match="multimodal"):
            getattr(core, name)(llm=llm, multimodal=True)
