"""Tree summarize: one call when everything fits, a level of summaries then a root when it does not."""

import math

from llama_index_convrag.synthesizers import TreeSummarize, get_response_synthesizer
from llama_index_convrag.testing import ScriptedLLM

from .conftest import SUMMARY, make_nodes, tokens

TEXTS = [" ".join(f"fact{i}x{j}" for j in range(30)) for i in range(6)]


def summary(context: str, query: str = "q?") -> str:
    return SUMMARY.format(context_str=context, query_str=query)


def test_fits_in_one_call(three_nodes):
    llm = ScriptedLLM.fixed("S")
    response = get_response_synthesizer(llm=llm, response_mode="tree_summarize").synthesize("q?", three_nodes)
    assert llm.prompts == [summary("alpha fact\n\nbeta fact\n\ngamma fact")]
    assert response.response == "S" and response.metadata["llm_calls"] == 1


def test_tight_window_summarises_each_window_then_the_summaries():
    llm = ScriptedLLM.cycle(["s1", "s2", "s3", "s4", "ROOT"], context_window=600, num_output=64)
    response = get_response_synthesizer(llm=llm, response_mode="tree_summarize").synthesize("q?", make_nodes(TEXTS))
    budget = 600 - 64 - tokens(summary("")) - 5
    leaves = math.ceil(sum(tokens(t + "\n\n") for t in TEXTS) / budget)
    assert leaves == 2
    assert llm.call_count == response.metadata["llm_calls"] == leaves + 1
    assert llm.prompts[-1] == summary("s1\n\ns2")
    assert response.response == "s3"  # cycle: the third scripted reply is the root's


def test_use_async_runs_a_level_in_parallel_with_the_same_prompts():
    seq = ScriptedLLM.fixed("S", context_window=600, num_output=64)
    par = ScriptedLLM.fixed("S", context_window=600, num_output=64)
    get_response_synthesizer(llm=seq, response_mode="tree_summarize").synthesize("q?", make_nodes(TEXTS))
    response = get_response_synthesizer(llm=par, response_mode="tree_summarize", use_async=True).synthesize(
        "q?", make_nodes(TEXTS)
    )
    assert sorted(par.prompts) == sorted(seq.prompts) and response.metadata["llm_calls"] == 3


async def test_async_tree_summarize():
    llm = ScriptedLLM.fixed("S", context_window=600, num_output=64)
    response = await get_response_synthesizer(llm=llm, response_mode="tree_summarize").asynthesize(
        "q?", make_nodes(TEXTS)
    )
    assert llm.prompts[-1] == summary("S\n\nS") and response.metadata["llm_calls"] == 3


def test_core_positional_order_llm_callback_manager_prompt_helper_template() -> None:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.indices.prompt_helper import PromptHelper
    from llama_index.core.prompts import PromptTemplate

    llm, cm, helper = ScriptedLLM.fixed("S"), CallbackManager([]), PromptHelper(context_window=512, num_output=64)
    template = PromptTemplate("Sum {context_str} for {query_str}")
    synth = TreeSummarize(llm, cm, helper, None, template)
    assert synth.callback_manager is cm and synth._prompt_helper is helper
    assert synth.get_prompts()["summary_template"].template == template.template
    assert str(synth.get_response("q", ["a", "b"])) == "S"
    assert llm.prompts == ["Sum a\n\nb for q"]
