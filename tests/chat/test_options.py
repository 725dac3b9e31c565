"""The written-down surface: the signatures match the lists in chat/options.py, every option object validates once
and names the bad value, and every name the engine took before is refused with its place now."""

from __future__ import annotations

import inspect

import pytest

from llama_index_convrag.chat import AnswerOptions, BudgetOptions, ConvRAGChatEngine, RewriteOptions
from llama_index_convrag.chat.factory import build_chat_engine
from llama_index_convrag.chat.options import AS_CHAT_ENGINE_NAMES, FROM_DEFAULTS_NAMES, MOVED
from llama_index_convrag.conversational.contextualize import ContextRules
from llama_index_convrag.errors import ArgumentTypeError, ConfigurationError
from llama_index_convrag.indices import ConvRAGIndex
from llama_index_convrag.testing import ScriptedLLM
from tests.chat.conftest import FixedRetriever


def named(fn: object) -> list:
    return [p.name for p in inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
            if p.kind is not inspect.Parameter.VAR_KEYWORD and p.name not in ("self", "index")]


def test_the_signatures_are_the_written_surface() -> None:
    assert named(ConvRAGChatEngine.from_defaults) == list(FROM_DEFAULTS_NAMES) and len(FROM_DEFAULTS_NAMES) == 15
    assert named(ConvRAGIndex.as_chat_engine) == ["chat_mode", "llm"]  # the rest are checked by build_chat_engine
    assert named(build_chat_engine) == ["chat_mode", "llm", "retriever_kwargs"]
    assert len(AS_CHAT_ENGINE_NAMES) == 13 and set(AS_CHAT_ENGINE_NAMES) - set(FROM_DEFAULTS_NAMES) == {
        "retriever_kwargs"}
    assert not set(MOVED) & (set(FROM_DEFAULTS_NAMES) | set(AS_CHAT_ENGINE_NAMES))


@pytest.mark.parametrize("old, place", [
    ("condense_prompt", "condense_question_prompt="), ("skip_condense", "RewriteOptions(strategy='none'"),
    ("return_source_documents", "AnswerOptions(return_source_nodes="), ("streaming", "stream_chat()"),
    ("rewrite_strategy", "RewriteOptions(strategy="), ("answer_hooks", "AnswerOptions(hooks="),
    ("judge", "AnswerOptions(judge="), ("count_tokens", "BudgetOptions(count_tokens="),
    ("text_qa_template", "synthesizer=get_response_synthesizer(text_qa_template="), ("max_depth", "JudgeOptions"),
    ("verbose", "logging"), ("context_rules", "RewriteOptions(context_rules="),
])
def test_a_moved_name_is_refused_naming_its_place(old: str, place: str) -> None:
    with pytest.raises(ArgumentTypeError, match=rf"from_defaults does not take \['{old}'\] \({old}: now .*"
                                                rf"{__import__('re').escape(place)}"):
        ConvRAGChatEngine.from_defaults(FixedRetriever([]), ScriptedLLM.fixed("x"), **{old: object()})


def test_option_objects_validate_once_naming_the_value() -> None:
    with pytest.raises(ConfigurationError, match=r"RewriteOptions.strategy must be one of \['auto', 'llm', "
                                                 r"'contextual', 'concat', 'none'\], got 'fused'"):
        RewriteOptions(strategy="fused")
    with pytest.raises(ConfigurationError, match=r"RewriteOptions.last_n_turns must be an int >= 0, got -1"):
        RewriteOptions(last_n_turns=-1)
    with pytest.raises(ArgumentTypeError, match=r"RewriteOptions.context_rules must be a ContextRules, got"):
        RewriteOptions(context_rules={"max_terms": 2})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown response mode|response_mode"):
        AnswerOptions(response_mode="bogus")
    with pytest.raises(ArgumentTypeError, match=r"AnswerOptions.citations must be a bool, got 'yes'"):
        AnswerOptions(citations="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"BudgetOptions.ratio must be in \(0, 1\], got 1.5"):
        BudgetOptions(ratio=1.5)
    assert AnswerOptions(hooks=[]).hooks == () and AnswerOptions().citation_mode == "aligned"


def test_context_rules_reach_the_llm_free_rewrite(store) -> None:  # type: ignore[no-untyped-def]
    from llama_index.core.schema import NodeWithScore, TextNode

    nodes = [NodeWithScore(node=TextNode(id_="n", text="passage"), score=1.0)]

    def rewritten(rules: ContextRules) -> str:
        engine = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes), None, conversation_store=store,
                                                 rewrite=RewriteOptions(strategy="contextual", context_rules=rules),
                                                 answer=AnswerOptions(response_mode="no_text"))
        engine.chat("Tell me about the Mariana Trench and its deepest point.")
        return engine.chat("How deep is it?").metadata["turn"].retrieval_query

    assert rewritten(ContextRules()) != rewritten(ContextRules(max_terms=1))
    assert len(rewritten(ContextRules(max_terms=1)).split()) == len("How deep is it?".split()) + 1


def test_the_support_scorer_reaches_the_aligned_citations_and_the_grounding_record(store) -> None:  # type: ignore[no-untyped-def]
    """``AnswerOptions(support_scorer=...)`` judges the answer's sentences in place of the lexical check: the record's
    grounding names it and its verdict (no passage above 0.5) leaves the sentence uncited and unsupported."""
    from llama_index.core.schema import NodeWithScore, TextNode

    nodes = [NodeWithScore(node=TextNode(id_="n", text="Christopher Nolan directed Inception."), score=1.0)]
    calls = []

    def doubtful(claim: str, passages: list) -> list:
        calls.append(claim)
        return [0.1 for _ in passages]

    with pytest.raises(ArgumentTypeError, match=r"AnswerOptions.support_scorer must be a callable .*got 'nli'"):
        AnswerOptions(support_scorer="nli")  # type: ignore[arg-type]
    engine = ConvRAGChatEngine.from_defaults(FixedRetriever(nodes), ScriptedLLM.fixed("Christopher Nolan directed it."),
                                             conversation_store=store, answer=AnswerOptions(support_scorer=doubtful))
    record = engine.chat("Who directed Inception?").metadata["turn"]
    assert calls == ["Christopher Nolan directed it."]
    assert record.answer == "Christopher Nolan directed it."  # uncited: the scorer finds no support
    assert record.grounding["method"] == "doubtful"
    assert [u["text"] for u in record.grounding["unsupported"]] == ["Christopher Nolan directed it."]
