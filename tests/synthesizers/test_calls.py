"""calls.py: the request types, the per-call ledger, and which template variables are still to fill."""

from llama_index.core.prompts import PromptTemplate, SelectorPromptTemplate

from llama_index_convrag.synthesizers.calls import (
    KNOWN_VARIABLES,
    CallRequest,
    EmbedRequest,
    RunState,
    template_variables,
)


def test_fill_puts_query_extras_and_context_together_context_last():
    run = RunState(query_str="q?", extras={"tone_name": "dry", "context_str": "from extras"})
    assert run.fill(context_str="chunk") == {"query_str": "q?", "tone_name": "dry", "context_str": "chunk"}
    assert run.fill() == {"query_str": "q?", "tone_name": "dry", "context_str": "from extras"}


def test_ledger_starts_empty_and_instances_do_not_share_lists():
    a, b = RunState("q", {}), RunState("q", {})
    a.skipped_chunks.append({"call_index": 0, "error": "x"})
    a.options["separator"] = " | "
    assert (b.llm_calls, b.prompt_tokens, b.llm_calls_saved, b.skipped_chunks, b.options) == (0, 0, 0, [], {})


def test_request_defaults():
    template = PromptTemplate("{query_str}")
    request = CallRequest(template, {"query_str": "q"})
    assert (request.structured, request.stream, request.consume) == (False, False, False)
    assert EmbedRequest("q", ["a", "b"]).texts == ["a", "b"]


def test_template_variables_skip_partials_and_function_mappings():
    template = PromptTemplate("{tone_name} {context_str} {query_str} {when}", function_mappings={"when": lambda **k: "now"})
    assert template_variables(template) == ["tone_name", "context_str", "query_str"]
    assert template_variables(template.partial_format(tone_name="dry")) == ["context_str", "query_str"]


def test_template_variables_cover_every_branch_of_a_selector_once():
    selector = SelectorPromptTemplate(
        default_template=PromptTemplate("{context_str} {query_str}"),
        conditionals=[(lambda llm: True, PromptTemplate("{query_str} {persona} {context_str}"))],
    )
    assert template_variables(selector) == ["context_str", "query_str", "persona"]


def test_known_variables_are_the_ones_synthesizers_fill():
    assert KNOWN_VARIABLES == {"query_str", "context_str", "context_msg", "existing_answer", "context_messages"}
