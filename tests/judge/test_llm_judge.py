import pytest
from llama_index.core.llms import CustomLLM, CompletionResponse, LLMMetadata
from llama_index.core.prompts import PromptTemplate

from llama_index_convrag.judge import LLMJudge, Verdict
from llama_index_convrag.prompts.judge import JUDGE_PROMPT
from llama_index_convrag.testing import ScriptedFailure, ScriptedLLM

PROMPT = JUDGE_PROMPT.format(question="When was it built?", chunk="The tower was built in 1889.")


def test_function_calling_offers_the_grade_tool_and_reads_its_arguments():
    llm = ScriptedLLM.fixed('{"grade": 2, "reason": "gives the year"}')
    judge = LLMJudge(llm)
    assert judge.function_calling is True
    assert judge.grade("When was it built?", "The tower was built in 1889.") == Verdict(2, "gives the year")
    [call] = llm.calls
    assert (call.kind, call.tools) == ("chat", ["grade_chunk"])
    assert call.messages[-1].content == PROMPT


def test_tool_arguments_chosen_by_the_model_are_read():
    llm = ScriptedLLM.echo(tool_fn=lambda prompt, tools: {
        "name": tools[0].metadata.name, "args": {"grade": 1, "reason": "city only", "follow_up": "Built when?"}})
    assert LLMJudge(llm).grade("q", "c") == Verdict(1, "city only", "Built when?")


@pytest.mark.parametrize("reply, error", [
    ("not json at all", "reply has no 'grade': \"{'__unparsable__': 'not json at all'}\""),
    ('{"grade": 5}', "grade 5 is out of range; accepted: [0, 1, 2]"),
])
def test_malformed_tool_replies_are_grade_zero(reply, error):
    verdict = LLMJudge(ScriptedLLM.fixed(reply)).grade("q", "c")
    assert (verdict.grade, verdict.reason, verdict.error) == (0, "malformed judge reply", error)


def test_text_mode_completes_the_prompt_and_parses_the_reply():
    llm = ScriptedLLM.fixed('Here you go: {"grade": 1, "reason": "r", "follow_up": "Who built it?"}',
                            function_calling=False)
    judge = LLMJudge(llm)
    assert judge.function_calling is False
    assert judge.grade("When was it built?", "The tower was built in 1889.") == Verdict(1, "r", "Who built it?")
    assert [(c.kind, c.prompt, c.tools) for c in llm.calls] == [("complete", PROMPT, [])]


async def test_async_twins_give_the_same_verdicts():
    for function_calling in (True, False):
        llm = ScriptedLLM.fixed('{"grade": 0, "reason": "off"}', function_calling=function_calling)
        assert await LLMJudge(llm).agrade("q", "c") == Verdict(0, "off")
    assert (await LLMJudge(ScriptedLLM.fixed("??")).agrade("q", "c")).error is not None


def test_call_failures_are_not_grades_and_propagate():
    with pytest.raises(ScriptedFailure):
        LLMJudge(ScriptedLLM.fixed("{}", fail_on_call=0)).grade("q", "c")


def test_custom_prompt_and_update_prompts():
    llm = ScriptedLLM.fixed('{"grade": 2}', function_calling=False)
    judge = LLMJudge(llm, judge_prompt=PromptTemplate("Q={question} C={chunk}"))
    judge.grade("a", "b")
    judge.update_prompts({"judge_prompt": PromptTemplate("C={chunk} Q={question}")})
    judge.grade("a", "b")
    assert llm.prompts == ["Q=a C=b", "C=b Q=a"]
    assert set(judge.get_prompts()) == {"judge_prompt"}


class _PlainLLM(CustomLLM):
    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_function_calling_model=True)

    def complete(self, prompt, formatted=False, **kwargs):
        return CompletionResponse(text='{"grade": 2}')

    def stream_complete(self, prompt, formatted=False, **kwargs):
        raise NotImplementedError


def test_function_calling_needs_a_function_calling_llm():
    with pytest.raises(ValueError, match="function_calling=True needs a FunctionCallingLLM, got _PlainLLM"):
        LLMJudge(_PlainLLM())
    assert LLMJudge(_PlainLLM(), function_calling=False).grade("q", "c") == Verdict(2, "")
    with pytest.raises(ValueError, match="LLMJudge needs an LLM"):
        LLMJudge(None)  # type: ignore[arg-type]


def test_the_tool_is_named_and_a_call_written_as_prose_is_read(openai_server):
    """Regression (Qwen2.5-0.5B behind llama.cpp): with tool_choice="required" it wrote the call as fenced prose,
    which used to be graded 0 as malformed; now the tool is named (llama.cpp then constrains the reply) and the
    prose form is unwrapped."""
    from llama_index_convrag.config import resolve_llm

    from .test_verdict import QWEN_PROSE_CALL

    openai_server.chat_responder = lambda body: {"content": QWEN_PROSE_CALL}
    llm = resolve_llm(base_url=openai_server.base_url, model="x", env={})
    assert LLMJudge(llm).grade("q", "c") == Verdict(0, "The passage is irrelevant.")
    [request] = openai_server.requests
    assert request.body["tool_choice"] == {"type": "function", "function": {"name": "grade_chunk"}}
